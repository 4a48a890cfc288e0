// Package runtime is the node a broker embeds: it wires the registry of
// open partition logs (supervisor.Registry), the metastore, and the open
// policy around them.
//
// Where each part lives:
//
//	node.go, startup.go        Config, New, Start, Close; the lazy open; the loops
//	startup_settle.go          Start's check and recovery of every boundary
//	startup_boundary.go        a closed partition's boundary, read from its directory
//	incarnation.go             the incarnation check, quarantine and its sweep
//	incarnation_vouched.go     a check's match, remembered while the topic has a log open
//	topics.go                  create, delete and purge, describes, Partitions
//	metastore.go               the Metastore contract: its records, errors and interface
//	metastore_local.go         LocalMetastore, the embedded single-node metastore
//	budget.go                  the open-log budget and the frame-cache budget
//	retention.go               the reaper and the cold walk, retention changes
//	diskguard.go               the disk floor
//	consumer.go                acks and consumer progress recovery
//	consumer_commit.go         consumer.ahead ticks, write-outs, consumer.offset
//	consumer_acked.go          the whole acked-ahead set at a clean close
//	queue.go, queue_lease.go   queue consume: leases, nacks, expiry, position
//	queue_parking.go           consumers waiting for records (long polls)
//	queue_leaseid.go           lease ids and consumer.lease
//	queue_extend.go            lease extension (slow work keeps its records)
//	cursor.go                  fan-out cursors
//	cursor_file.go             a cursor's file: slot write-outs, replaces
//	lag.go, metrics.go         consumer lag and per-topic metrics
//
// and, apart, what only a cluster's moves call (Moves, below):
//
//	moves_source.go            the old owner's listing, file opens and freeze
//	moves_receive.go           the new owner's streamed receive
//	moves_install.go           the install and its recovery; InstallPartition
//	moves_drop.go              the drop of a copy no longer owned; PartitionDirs
//	moves_setaside.go          the set-aside of a copy given away while lost
//
// The data directory's lock and a node's identity are package datadir's.
//
// What it does:
//
//   - Lazy open: a partition's log opens on first use, under its topic's
//     guard, after the metastore lookup, the assignment check and the
//     incarnation check (docs/design.md, "The incarnation marker"): a
//     matching marker is served, a missing one adopted, a different one
//     quarantined to topics/<name>.stale-<oldid> (the old incarnation's
//     consumer state dropped before the fresh directory exists) and a fresh
//     directory opened. The marker has a copy, written after it: with one
//     of the two missing or damaged the other decides (and both are
//     written again); with neither decoding the directory is taken as
//     the record's and stamped again, unless a partition's consumer
//     progress names another incarnation (then it is refused,
//     ErrIncarnationMarkerDamaged, neither served nor quarantined). A
//     match is remembered while the topic has a log open, and forgotten
//     when its last log closes and before any marker write, quarantine or
//     purge (vouchedTopics). An open log is checked again whenever the
//     topic's metadata version moves (the metastore's change feed).
//   - Writes: Produce holds the partition's produce gate shared, so waiting
//     produces coalesce into one group commit; AppendCommit holds it
//     exclusive for the design's Append + CommitDurable pair; every close
//     of a live log holds it exclusive, so it lands between two commits.
//   - Startup settles every owned partition's boundary before Ready and
//     opens as many partitions as the open-log budget holds. Each
//     partition's listing, hwm file and newest segment's size are read,
//     never its segments' bytes (startup_boundary.go); one whose boundary
//     is not exact (a crash) is opened and closed again, which recovers it
//     and writes the boundary, on up to 32 partitions at once (never more
//     than the budget) across topics and across one topic's partitions.
//     Then up to the budget are opened and left open, the recovered ones
//     first, then the rest in order: a node within its budget starts with
//     every partition open, as before, and one past it in the time of the
//     budget's opens and the checks, opening none past the budget after a
//     clean stop (the warm set is worth the budget's opens: a first call
//     on it pays none; and the recovered partitions were the ones in use
//     when the node went down). With the cold walk off every partition is
//     opened, each past the budget closing the least recently used, since
//     nothing else would sweep one left closed. A partition left closed
//     opens on first use as after idle eviction; its high watermark gauge
//     is its boundary on disk and its cursors' series exist from startup.
//     What fails is skipped with a warning; progress lines count what was
//     checked, recovered, opened and skipped. Startup first reclaims
//     quarantined directories whose incarnation the metastore confirms
//     gone, and a supervised loop does so again every
//     QuarantineSweepInterval.
//   - Idle eviction (a supervised loop) closes logs unused for
//     IdleEvictAfter; with the cold walk off, only once retention has
//     nothing left to delete in them.
//   - The open-log budget (budget.go, MaxOpenLogs, by default from the
//     open-file limit) bounds the logs open at once: an open past it closes
//     the least recently used log nobody is using (supervisor.Registry),
//     and a call finding none, or meeting the open-file limit, fails with
//     ErrBusy, retryable, nothing written. Startup past the budget
//     recovers every partition that needs it and opens the budget's worth
//     (above).
//   - Retention (retention.go): the reaper (reaper/) sweeps every open log
//     each ReaperInterval; the cold walk (coldwalk/), every
//     ColdWalkInterval, sweeps a closed partition holding an expired
//     segment by opening it under its topic's guard (only if its directory
//     still exists), sweeping once and closing it, never installing it. A
//     retention change reaches open logs in place (this node's own in
//     UpdateRetention, another's through the change feed's recheck) and,
//     when it moves a log's bounds, triggers a reaper pass, so it is
//     applied at once, written to or not.
//   - Scrubber (scrub.go): with ScrubRate set, the scrubber (scrub/)
//     checks every sealed segment of the partitions the node owns from
//     their directories, never opening a log; it looks open logs up
//     without a use, and writes its progress files under the topic's
//     guard, only while the partition's directory exists.
//   - Consumer progress (consumer.go, consumer_commit.go): Ack and
//     ConsumerState per partition; the frontier and acked-ahead set are
//     written into consumer.ahead's window slot every 100 ms by a
//     supervised committer and written out (fdatasync, then the window
//     becomes the anchor) once per ConsumerOffsetCommitInterval; a
//     consumer.offset levelled at most every 30 s and at close, only ever
//     from a durable frontier, so one above consumer.ahead's is damage and
//     is rejected (docs/design.md R4). Recovery is lazy, on first touch, from
//     both files; a frontier above the high watermark is rejected and
//     counted. A set too large for a slot keeps its lowest offsets there,
//     and a clean close writes it whole to consumer.acked
//     (consumer_acked.go), so only a crash loses acks. Closing a log
//     writes the files out and closes the held descriptor.
//   - Partitions lists the partitions the metastore assigns this node,
//     opening none.
//   - Peeks and describes answer a closed partition from its directory and
//     hwm file without opening it, after waiting for a close in progress;
//     an empty hwm file with records present is an unknown boundary, never
//     0.
//
// LocalMetastore is the embedded single-node metastore: every partition is
// this node's, and the records persist crash-safely and checksummed in
// <data dir>/metastore.json, outside topics/, and again, after it, in
// metastore.json.copy: one damaged file or lost write (a lying fsync)
// leaves the other, never older than a change that returned (the higher
// version wins); with both damaged (or one damaged and the other never
// written) the records are rebuilt from the topic directories (name,
// marker, partition count; retention keep-forever until set again), never
// an empty metastore whose topics' directories a sweep would purge.
//
// # Moves
//
// What a broker calls is the data path above. The rest of Node's methods
// are the storage side of a partition move, which a cluster's node calls
// (cluster.Participant; a node alone never does), in the moves_*.go files:
//
//   - On the old owner: TransferListing reads the partition's directory
//     without opening its log and refuses a stale incarnation;
//     OpenTransferFile opens one file it lists; FreezePartition closes
//     the log between two commits once the metastore no longer assigns the
//     partition here, so the files listed then are final.
//   - On the new owner: ReceivePartition streams the files into a staging
//     directory, and its Commit stamps the marker and swaps it in,
//     atomically across a crash (Protocols, below); InstallPartition is a
//     receive of files held in memory (tests install with it; a cluster's
//     moves stream).
//   - A copy of a partition the metastore no longer assigns this node is
//     removed once its move completed (DropPartition), or, when an
//     operator reassigned it while the node was marked lost, set aside
//     (SetAsidePartition) into <data dir>/lost/: never served, swept or
//     removed by the node, the operator's to recover. PartitionDirs lists
//     the copies a node holds, whoever owns them.
//
// # Protocols
//
// Each multi-step operation on the data directory, with the locks held
// across it (the order is always produce gate, then topic guard, then map
// lock) and why a crash at any of its steps is safe. "Synced" means the
// directory holding the entry was fsynced (vfs.FS.SyncDir); the simulated
// disk's crash images prove each argument (fences_test.go and
// protocols_crash_test.go).
//
// Data directory lock. New takes an exclusive lock on <data dir>/LOCK
// (datadir.Acquire; an open-file-description lock, which the kernel drops
// with its process, so a crash never leaves a stale one; the daemon takes
// it before it reads the metastore and hands it to New) before it reads or
// writes anything else there, writes its pid into the file, and holds it
// until Close has closed every log and every operation under a topic
// guard has finished. A second node, in this process or another, is
// refused with datadir.ErrLocked naming that pid; the read-only commands
// ask whether it is held without taking it (datadir.InUse). At start, New syncs the
// data directory and topics/, so entries a crashed process left only in
// the page cache are durable before anything is acked into them.
//
// Topic directory create (under the topic's guard, in the open path): the
// directory and its missing parents are created and each created entry's
// parent synced (vfs.MkdirAllDurable; a failed sync removes what it
// created, so the retry syncs it again), topics/ is synced once more, and
// then the incarnation marker is written atomically (temporary file,
// fdatasync, rename, directory sync), and its copy after it the same way. A crash before the marker's rename
// leaves a directory without a marker, which the next open adopts
// (stamps) for the record's incarnation after syncing topics/ again: it
// holds nothing yet, and its entry may be one a power loss would drop. A partition directory is created the same way by
// partition.Open, and its first segment only after its own entry is
// synced, so no acked record ever lives in a directory a power loss can
// drop.
//
// Topic delete and purge (DeleteTopic): the metastore record is removed
// durably first; then, under the topic's guard, the open logs are closed
// (no produce gate: the topic has no valid commit left), the in-memory
// consumer state dropped, an earlier topics/<name>.stale-<id> leftover
// removed, the directory renamed to topics/<name>.stale-<id> and topics/
// synced, and only then removed and topics/ synced again: a removal cut
// short (RemoveAll unlinks in directory order) never leaves the deleted
// data under the live name without its markers. A crash before the
// rename leaves a whole directory no record names: it is never served
// (an open needs the record); the quarantine sweep (at start and every
// QuarantineSweepInterval) purges it once the metastore confirms its
// marker's incarnation gone, and if the name is recreated first, the
// open path quarantines it (next). A crash after the rename leaves the
// stale directory, which the sweep reclaims. If the name was recreated
// meanwhile (the marker is another incarnation's), the purge leaves the
// directory to the new incarnation; a marker it cannot read (an I/O
// error) leaves it too (the delete reports the error). The sweep also
// quarantines a directory whose marker's incarnation the metastore
// confirms gone while the record names another: on a cluster's node that
// owns none of the recreated topic's partitions, no open would.
//
// A metastore change whose save fails is taken back in memory and the
// state before it saved again at a fresh version; if that fails too the
// embedded metastore refuses changes, and the node produces that start
// from then on, until it is reopened (ErrMetastoreBroken).
//
// Startup check and recovery (startup_settle.go), under each topic's
// guard, a chunk of its partitions at a time: the incarnation check runs
// first, so the directory is the record's; then each partition's listing,
// hwm file and newest segment's size are read. Its boundary is exact when
// the file holds a value at least the newest segment's base, equal to it
// exactly when that segment is empty, or when the file holds none and no
// segment holds a byte. Such a partition needs nothing (it stays closed
// unless the budget's opens take it); any other is opened outside the
// registry, as a cold sweep opens one, and closed again. Why one left
// closed is safe: a partition's segments and hwm file change only under
// its open log or its topic's guard, and the open trusts the hwm file only
// when it equals the tail its CRC walk finds (docs/design.md, "High
// watermark and hidden tail"), so whenever the first open comes it
// recovers exactly what it would have at startup, and nothing writes the
// partition before it (the cold walk opens through the same path, and a
// move's new owner opens what it copied under the same rule). The file
// holds a value only from a close, which writes and fdatasyncs it after
// cutting the segment back to the boundary, and keeps it until the first
// commit of the next open empties it (synced) before the boundary moves:
// so a crash while a log is open leaves it empty or, before any commit,
// the exact boundary of every record ever exposed (what lies above it is a
// hidden tail the first open exposes after an fsync, as at any open). A
// crash inside a close's write leaves it empty (recovered), right (exact),
// or 8 bytes whose size reached the media without their data: zeros, which
// never pass over a partition with records (0 is below the newest base, or
// equal to it with bytes in that segment), so no reader that skips an open
// on a boundary of 0 (the queue consume's nothingFree) meets them; or,
// with a torn sector, garbage, which passes only as a value above the
// newest base with bytes in that segment, by no more records than those
// bytes can hold (maxRecordsIn: random bytes almost never do): then the readers that do not
// open the log (describe, the high watermark gauge, a cursor's lag, a
// move's listing) show that value until the partition's first open, and no
// record is lost or exposed by it. A recovery is an open and a close,
// whose crash arguments are the log's (partition/doc.go: the open is
// idempotent, and a crash inside the close leaves one of the states
// above), so a crash during startup leaves what the next startup checks
// again; the check writes nothing. A recovery whose close fails leaves
// the file as it was (zeros, say), so that partition is opened after the
// pass and left open, whatever the budget, never left closed behind it. The gauge's mark for a partition
// (partitionMarks.seed) is set under the same hold of the guard as the
// read it comes from, so no open, close, install or purge lands between
// them.
//
// Quarantine rename (checkIncarnation, under the topic's guard): the
// topic's open logs are closed, an earlier leftover of the same
// incarnation removed, topics/<name> renamed to topics/<name>.stale-<id>
// and topics/ synced; only then is the deleted incarnation's consumer
// state dropped and a fresh directory created (as above). A crash before
// the sync leaves the old name, which the next open quarantines again; a
// crash after it leaves the stale directory, never served, reclaimed once
// the metastore confirms its incarnation is gone (SweepQuarantine, under
// the guard: remove, then sync topics/).
//
// Install of a moved partition (ReceivePartition, then Receiver.Commit):
// the files are written and fdatasynced into pNNNNN.installing as they
// arrive, outside every lock (the partition keeps serving what it holds;
// nothing of the staging directory is served). At the Commit the produce
// gate is taken exclusive and the topic's guard held from the close of
// the live log to the last directory sync
// (supervisor.Registry.WithPartitionClosed), so no produce and no lazy
// reopen reaches the partition while its directory is replaced: the
// staging directory is synced, renamed to pNNNNN.install
// (complete from then on) and topics/<name> synced; then the old directory
// is renamed to pNNNNN.replaced, pNNNNN.install to pNNNNN, the topic
// directory synced, and pNNNNN.replaced removed. A power loss keeps a
// prefix of those renames, so the names on disk are one of: old pNNNNN
// with .installing (removed at the next start), old pNNNNN with .install,
// .replaced with .install (both rolled forward: the install completes),
// new pNNNNN with .replaced (removed). New settles every such leftover
// (settleInstall, logged) before any log opens, so a partition is never
// left without a directory and never opened as an empty log at offset 0.
// The record is read again under the guard, so a delete and recreate
// that ran since the caller looked refuses the install. From the rename
// that makes .install complete, a failure in this process leaves the
// partition marked unsettled: its next open, listing or peek settles it
// first, as a restart would (a complete staging directory is rolled
// forward, an incomplete one removed), or fails.
//
// Drop and set aside (DropPartition, SetAsidePartition), under the
// produce gate, exclusive, and the topic's guard, with the live log closed
// (supervisor.Registry.WithPartitionClosed): a drop renames pNNNNN to
// pNNNNN.dropped, syncs the topic directory, removes it and syncs again (a
// crash leaves .dropped, removed at the next start). A set-aside creates
// lost/<topic>.<incarnation>/ durably, stores there each of the topic's
// dictionary files that checks out (partition.StoreDictionaryFile: synced
// with its entry, so the copy's frames still decode once the topic is
// deleted; before the rename, so no crash leaves a copy without the
// dictionaries it names), renames pNNNNN into it as
// pNNNNN.<unix ms> (a suffix when the name is taken), and syncs the topic
// directory and the destination: the rename is atomic, so a crash leaves
// the copy whole under one name or the other, never in both.
//
// Eviction and reopen: every close of a live log holds the produce gate
// exclusive and the topic's guard (CloseLive), so it lands between two
// commits; the log writes its exact high watermark to the hwm file and
// closes; the consumer state beside it is written out (OnClose). A reopen
// is a lazy open under the guard. Node.Close first fences the registry
// (supervisor.Registry.Close): no open installs a log and no guarded
// operation (install, purge, quarantine sweep, cold sweep, describe)
// starts after the fence, and Close waits for every topic guard once, so
// the ones under way finish before it closes the logs and releases the
// data directory; an open under way closes what it opened and answers
// ErrNodeClosed, so no log outlives Close. A log closed by a caller of
// Node.Log is found closed by the next open, which settles its entry and
// opens it again; a read that meets a log closed under it reopens it as
// often as it takes.
//
// Retention detach and unlink (partition.Log.Sweep): the actor detaches
// the expired segments (oldest first) and publishes the new start offset;
// the sweep then unlinks their files outside the actor, oldest first, and
// syncs the partition directory. Close waits for a sweep's unlinks before
// the log stops, so a reopen never lists a segment whose detach was
// decided and then loses it to the late unlink. A crash between detach and
// unlink leaves the detached segments on disk: the next open lists them as
// retained (intact) and the next sweep deletes them again; a crash between
// two unlinks leaves a contiguous suffix, never a hole. An unlink that
// fails stays pending for the next sweep (and, if the log closes first,
// the file is listed again by the next open, intact).
//
// Whole acked-ahead set at a clean close (consumer_acked.go), under the
// consumer's lock, after the close's write-out: a set over a slot is
// written to consumer.acked by vfs.WriteFileAtomic (temporary file,
// fdatasync, rename, directory sync), a set that fits removes the file
// (unlink, directory sync). Recovery adds the file's offsets (this
// incarnation's, above the frontier, below the high watermark) to the
// slots' set. A crash at any step leaves the old file, the new one or
// none: each holds only offsets that were acked, so adding them is safe
// whatever the slots say, and once the close returned the file holds
// every ack the slots do not.
//
// Queue position (queue_lease.go, bindLocked), under the queue's lock and
// then its consumer's: a queue takes its position from the consumer
// progress it leases against, never from progress looked up before the
// lock (an install may have replaced it). When that progress is recovered
// afresh after a close, every offset below the queue's next that it does
// not hold acked, and the queue neither leased, gave back nor passed over
// as unreadable, is given back for redelivery: memory only, nothing to
// crash.
//
// Lease ids (queue_leaseid.go), under the queue's lock: a queue's first
// lease reads consumer.lease (the floor no id given for the partition
// exceeds) and starts its ids above it and above the clock; an id above
// the floor on disk first raises it by a block (written atomically:
// temporary file, fdatasync, rename, directory sync), and only then is a
// record read for the lease. A crash at any step leaves the old floor or
// the new one whole, never a torn one, and loses no id given (none was
// given above the old floor): the clock that starts the ids of a missing
// or damaged file may be behind ids given (a load starts above the floor,
// up to a block ahead of the clock). A move's listing is taken after the
// old owner's log closed, which no lease with an id drawn after the copy
// survives (its reads fail), so the new owner starts above every id the
// old one gave.
//
// Queue consume (queue.go, queue_lease.go, queue_extend.go): a lease is the partition's
// queue lock (the single pump), then its consumer's lock for the frontier
// and the acked set, then reads of the open log; the topic's guard is
// never taken under a queue's lock (a log is opened before it). Leases,
// redeliveries and parked consumers live in memory only: a crash or a
// restart delivers again every record not acked (at-least-once), which
// needs no file. What a lease writes is the lease id floor (above) and,
// for a damaged frame or records retention deleted, an ack without a
// consumer (skipRange), persisted as every ack is.
//
// Fan-out cursors (cursor.go, cursor_file.go): a create writes
// cursor.<name> in each owned partition's directory (cursor-new.<name>
// created, slot 0 written, fdatasync, renamed to cursor.<name>, directory
// sync) under the topic's guard, with the log open and the directory's
// marker the record's; a crash leaves no file (the next create makes it)
// or the whole one, never a torn one. A failed write-out counts the
// cursor as not written out, whatever the file may hold. Reads move the
// position in memory under the cursor's reading lock, then its mu; the
// position is written out in place into the slot the newest position is
// not in (one write, fdatasync, no create, no directory sync: a torn or
// short write damages that slot alone) by the cursor_writer loop every
// ConsumerOffsetCommitInterval and at Close, so a crash steps a cursor
// back, never forward. A file of the older 8-byte format, or a damaged
// one, is replaced whole at the next write-out (a temporary file
// renamed over it, the directory synced). A file with no valid slot, or
// above the high watermark, is damage and reads as the first record. A
// delete removes each file and syncs the directory, under the guard,
// after dropping the state in memory (nothing writes it again); a crash
// partway leaves some partitions' files, removed by the next delete.
// Cursor files move with their partition (the listing writes each
// position out first) and go with their incarnation.
//
// Disk floor (diskguard.go, partition/space.go): before the partition's
// actor takes a batch in (each message of a group commit, and Append) it
// asks the node's guard, under the guard's own leaf lock, for what the
// commit adds to the file system (its frame, less what lands in space
// already written or reserved ahead; for a roll, the new segment and the
// time index); the guard refuses (ErrLowDisk, nothing written) when the
// free space, read by statfs at most every 100 ms, less what it let
// through and the logs have not released, would go under the floor.
// Space prepared ahead of the frames is asked for separately and skipped
// when it does not fit. Nothing is written for the guard, so nothing to
// crash: a refused batch leaves nothing, and a crash forgets the count,
// which the next reading starts afresh.
//
// Frame-cache budget (budget.go, partition.CacheBudget): memory only. The
// open logs' decoded frames count against one node-wide bound; a log over
// it drops its own oldest frames, and a closed log gives its bytes back.
// Nothing is written, so nothing to crash; the bound is checked at each
// cache insert, atomically, with no lock shared between logs.
//
// Consumer write-out (consumer_commit.go): every tick writes the frontier
// and acked-ahead set into consumer.ahead's window slot through a held
// descriptor (the file's creation synced into its directory first); a
// write-out fdatasyncs it and only then flips the window to be the
// anchor, so the anchor slot is never written while it is the anchor. A
// crash loses at most the acks since the last write-out (the window may
// be torn: its checksum rejects it and the anchor wins). consumer.offset
// is levelled only from a durable frontier (8 bytes in place, fdatasync,
// its creation synced), so one above consumer.ahead's frontier is damage
// and is rejected.
package runtime
