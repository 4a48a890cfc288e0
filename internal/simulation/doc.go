// Package simulation is the deterministic simulator: one runtime.Node
// in a testing/synctest bubble on the simulated disk (vfs/sim), driven by
// a random workload drawn from (seed, run) and checked against a model
// after every operation.
//
// A run (sim.go) creates one or two topics of one to three partitions and
// draws each operation from a PCG source of its own, seeded with (seed,
// run) and the operation's index (replay.go, ops.go):
// produce (1 to 50 records whose bytes name their topic incarnation,
// partition and offset), read, queue consume of one partition or any,
// ack, nack under a live or an old lease id, a pause of the fake clock
// (leases run out, write-outs, idle eviction, the reaper and the cold
// walk run), a retention change by time, bytes, both or none, a check
// that retention was applied within its delay, a drain (every lease run
// out, then everything consumed), a check of the consumer progress, a
// clean restart, a crash (an image of the disk under a random crash plan,
// a new node on it) and a topic's delete and recreate. Every node has an
// open-log budget of one or two logs, so logs close and reopen under
// everything.
//
// Fan-out cursors, long polls, concurrent producers and the disk floor
// have files of their own (ops_cursor.go, ops_longpoll.go,
// ops_concurrent.go, ops_floor.go; their model model_live.go, their
// checks check_cursor.go): cursors made from the earliest or the latest
// record, then moved to an offset or a time (a seek by time, checked),
// read through (advancing or peeking), committed (in range and out),
// deleted and looked up, and checked after restarts and crashes; a fetch
// or a cursor read long-polling at the high watermark through the HTTP
// API (package httpapi, served in process), woken by a commit to its
// partition, not by one to another, answered 404 by a delete of the
// topic, or empty at its deadline; one or two queue consumes waiting,
// woken by a produce or a nack, the oldest served first; two to five
// producers of 1 to 1,000 records at once on one partition, the first
// commit held at its first file call (a gate, gate.go) while the others
// queue behind it, so the run's seed orders them, not the scheduler; and
// the node's floor of free space (64 KiB and 16 inodes in every run), the
// disk shrunk to just above it, produce refused, then taken again once
// retention freed space. Each of them lets the bubble settle before it
// starts and waits, with synctest.Wait, for every goroutine it started
// before it checks. The line before the summary counts what they did.
//
// Injected faults (ops_faultkit.go, ops_fault.go, ops_faultclose.go,
// ops_lie.go; their model in model_fault.go and check_fault.go): an
// operation arms one fault of vfs/sim, drawn from the run, on one
// partition's files or the metastore's, for one call or every call of a
// few operations, and runs what meets it: EIO, ENOSPC and short writes on
// a produce's segment write, EIO on the hwm file's release; a failing
// fdatasync of a segment, which poisons the log (the model then expects
// every produce refused until a restart, a crash or an eviction reopens
// it); EMFILE on the opens of a partition's files, EIO on the consumer's
// first touch of its files and on consumer.lease's write; EIO, ENOSPC and
// short writes of what a clean close writes (consumer.ahead,
// consumer.offset, consumer.acked, the hwm file) by the open-log budget,
// idle eviction or a restart; EIO, ENOSPC and short writes of the
// metastore's files under a retention change or a delete; and lying fsyncs
// of one kind of a partition's files followed by a crash, whose cost is
// counted, not called a violation. Each answer is checked against the kind
// the docs name for it, a failed batch keeps nothing, and the node serves
// the rest. bigAck (ops_bigack.go), in the long runs, grows an acked-ahead
// set past a consumer.ahead slot and closes the log cleanly.
//
// The model (model.go, model_ack.go) and the checks (check.go,
// check_retention.go: a retention change applied at once to the logs
// open at it) are those of docs/durability.md, "The simulator"; the first
// disagreement stops the run, and the test prints the command that
// replays it (ReplayLine) with the run's operations, then a shorter list
// of them that fails the same check (Shrink, shrink.go: delta debugging
// over the operations, each run alone as Options.Ops lists them).
// TestSimulation runs a batch of runs (batch_test.go): the CI's 2,000, or
// any range of runs of any seed, several at once (the long-run command).
//
// A run replays exactly: the same (seed, run) makes the same file calls,
// in the same order, and leaves the same crash images, in any process,
// alone or beside other runs. settle.go says how the workload takes the
// order of the node's goroutines from the Go scheduler, and gate.go how
// callers woken while the node's goroutines work get theirs; trace.go
// hashes a run's calls and images (Result.Trace), which the replay tests
// compare across executions and processes.
//
// One run in eight is a cluster run (cluster.go, cluster_meta.go,
// ops_move.go): two or three nodes, each on a simulated disk of its own,
// in the run's one bubble, sharing an in-memory metastore that says which
// node owns each partition (a fake of the cluster's etcd), their topics of
// one partition each, every operation on a topic made on its owner.
// Besides the single-node operations (but retention changes, deletes,
// long polls, concurrent producers, the floor and the single-node
// faults), a cluster run moves a partition between nodes through the
// node's own move primitives (the listing, the freeze, the receive and
// install, the drop) with the files copied in memory, one move in four
// failed by a fault on the new owner's install and cancelled, one in
// eight with the new owner crashed during its install (ops_movecrash.go);
// drains a node; marks one lost (its partitions given to the others
// empty; it comes back and sets its copies aside, or a fresh node joins);
// restarts or crashes one node; extends leases (ops_extend.go); and fails
// the background write-outs of cursors or consumer progress, then crashes
// the node, with the fault lifted a write-out before or still in force
// (ops_faultwriteout.go). The model checks that a move carries every
// record, the boundary, every ack and every cursor's position, that a
// cancelled one leaves the old owner as it was, that a crash keeps an
// install whole or not at all, that nothing of a lost node is served
// again, the lease rules of an extension, and what a crash after failed
// write-outs may take back. docs/durability.md lists what is left out.
package simulation
