// Package campaign is the crash and fault campaign over a whole node: it
// runs the fault model's reference workload through runtime.Node on the
// simulated disk and checks the invariants I1 to I10 of the durability
// contract on every state it explores (docs of the fault model: the
// invariants, the 33-row matrix and the reference workload).
//
// What it explores so far: every crash state of the reference workload
// (crash.go): an image before every mutating call, in every crash mode of
// the simulated disk (unsynced data dropped, kept, torn at sectors into
// zeros or garbage, each with every prefix of the unsynced namespace
// changes), deduplicated by hash, each checked on a fresh node. Damaging
// every block and failing every call are the campaign's next parts.
package campaign
