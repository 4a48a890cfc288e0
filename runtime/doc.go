// Package runtime is the node a broker embeds: it wires the registry of
// open partition logs (supervisor.Registry), the metastore, and the open
// policy around them.
//
//   - Lazy open: a partition's log opens on first use, under its topic's
//     guard, after the metastore lookup, the assignment check and the
//     incarnation check (storage-engine.txt, "The incarnation marker"): a
//     matching marker is served, a missing one adopted, a different one
//     quarantined to topics/<name>.stale-<oldid> (the old incarnation's
//     consumer state dropped before the fresh directory exists) and a fresh
//     directory opened. An open log is checked again whenever the topic's
//     metadata version moves (the metastore's change feed).
//   - Writes: Produce holds the partition's produce gate shared, so waiting
//     produces coalesce into one group commit; AppendCommit holds it
//     exclusive for the design's Append + CommitDurable pair; every close
//     of a live log holds it exclusive, so it lands between two commits.
//   - Startup opens every owned partition before Ready: up to min(8,
//     GOMAXPROCS) topics at once, skipping with a warning what fails, with
//     progress lines; it first reclaims quarantined directories whose
//     incarnation the metastore confirms gone, and a supervised loop does so
//     again every QuarantineSweepInterval.
//   - Idle eviction (a supervised loop) closes logs unused for
//     IdleEvictAfter; with the cold walk off, only once retention has
//     nothing left to delete in them.
//   - Retention (retention.go): the reaper (reaper/) sweeps every open log
//     each ReaperInterval; the cold walk (coldwalk/), every
//     ColdWalkInterval, sweeps a closed partition holding an expired
//     segment by opening it under its topic's guard (only if its directory
//     still exists), sweeping once and closing it, never installing it. A
//     retention change made elsewhere reaches open logs in place through
//     the change feed's recheck.
//   - Consumer progress (consumer.go, consumer_commit.go): Ack and
//     ConsumerState per partition; the frontier and acked-ahead set are
//     written into consumer.ahead's window slot every 100 ms by a
//     supervised committer and written out (fdatasync, then the window
//     becomes the anchor) once per ConsumerOffsetCommitInterval; a
//     consumer.offset levelled at most every 30 s and at close, only ever
//     from a durable frontier, so one above consumer.ahead's is damage and
//     is rejected (fault-model R4). Recovery is lazy, on first touch, from
//     both files; a frontier above the high watermark is rejected and
//     counted. A set too large for a slot keeps its lowest offsets: the
//     frontier is never moved, the rest are redelivered after a crash.
//     Closing a log writes both files out and closes the held descriptor.
//   - TransferListing and InstallPartition are the storage side of a
//     partition move: the listing reads the directory without opening the
//     log and refuses a stale incarnation; the install writes the files
//     into a staging directory, stamps the marker and renames it in place.
//   - Partitions lists the partitions the metastore assigns this node,
//     opening none.
//   - Peeks and describes answer a closed partition from its directory and
//     hwm file without opening it, after waiting for a close in progress;
//     an empty hwm file with records present is an unknown boundary, never
//     0.
//
// LocalMetastore is the embedded single-node metastore: every partition is
// this node's, and the records persist crash-safely in
// <data dir>/metastore.json, outside topics/.
package runtime
