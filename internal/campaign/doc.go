// Package campaign is the crash and fault campaign over a whole node: it
// runs the fault model's reference workload (workload.go) through
// runtime.Node on the simulated disk and checks the durability contract's
// invariants on every state it explores (docs/durability.md has the fault
// model, the invariants, the matrix and the figures).
//
//   - Crash (crash.go): an image before every mutating call, in every
//     crash mode of the simulated disk, deduplicated by hash, each started
//     twice on a fresh node, read in full and committed to once more.
//   - Damage (damage.go): after a clean run, every sector of every file
//     bit-flipped, zeroed and failing reads, and every frame given huge
//     lengths or overwritten by its predecessor.
//   - Faults (faults.go): every mutating call failed in turn (EIO, ENOSPC,
//     EMFILE, a short write, a lying or slow fsync, a file system turning
//     read-only), the workload going on as a broker would, then a process
//     restart and the crash states around the failure checked.
//   - Long (long.go): randomized runs with lying fsyncs, random per-sector
//     crash plans and single damaged blocks, any number of them, each
//     replayable from its seed and run.
//
// Every state is checked by observe and checkAgainst (observe.go) against
// the workload's three-valued model (Model). The workload runs in a
// testing/synctest bubble, so its calls come in the same order on every
// run and a state named by its seed, variant, call and mode replays.
package campaign
