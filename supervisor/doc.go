// Package supervisor keeps a node's partition actors and long-running loops
// alive and in order.
//
// Registry is the map of open partition logs (the design's runtime.Logs)
// with the design's lock order, produce gate -> topic guard -> map lock,
// and a lock-order checker tests turn on. The open itself (metastore
// lookup, incarnation check) is the caller's function, run under the topic
// guard; every close of a live log takes the produce gate exclusive first,
// except a purge's and a stale incarnation's (GuardedTopic.CloseAll).
//
// StartLoop runs a named loop under supervision: a panic is contained and
// counted, a loop that stops ticking is replaced (narad_<name>_restarts),
// and restarts past a cap are logged at error as the alarm.
package supervisor
