// Package diskcheck probes the file system of a data directory, in a few
// hundred milliseconds, for what the engine's durability and its limits
// rest on, and says what it finds: the `narad-storaged diskcheck`
// command, and the probe a node runs at its start (package server).
//
// The package owns the probe, its files, its verdicts and their output
// (text, JSON, log lines, gauges). It measures, through the vfs seam
// and the engine's own calls (vfs.File.Sync is fdatasync, Allocate is
// fallocate with FALLOC_FL_KEEP_SIZE as a busy partition reserves,
// vfs.FS.SyncDir the directory fsync after a create or remove):
//
//   - fdatasync latency (p50, p99, max) after a 4 KiB append (the flush
//     journals the new size and blocks) and after a 4 KiB overwrite of a
//     block already synced (data only);
//   - a directory's fsync after a create and after a remove in it;
//   - whether a reservation past the end works (and its giving back);
//   - the file system's type and its device's write cache
//     (vfs.FSDescriber), its free bytes and inodes against the node's
//     floors, and the open-file limit against the open-log budget the
//     node computes (given by the caller, from package runtime's sum).
//
// Each check (Checks) ends in one Finding: OK, Warning, Error or
// Skipped. Errors are what stops the node from working as configured:
// a write, fdatasync, create, remove or directory fsync that failed, a
// probe file that could not be created, free space or inodes under the
// floor, a statfs that failed; and, with Options.MemoryFSIsError (the
// command), a file system in memory only. Warnings weaken durability or
// speed: a file system whose fsync is known not to persist (tmpfs,
// ramfs: a node's start only warns of one) or to
// depend on something else (an overlay, a network or FUSE file system;
// vfat and exfat have no journal), flushes implausibly fast for a device
// that flushes a volatile cache (FastFlush, a heuristic: judge.go says
// what it can and cannot tell), fallocate unsupported or failing, an
// open-file limit under what the budget needs, a probe file that could
// not be removed.
//
// # Its bound
//
// A round is an append, its fdatasync, an overwrite and its fdatasync,
// and every eighth round a create, a directory fsync, a remove and a
// directory fsync. The probe takes at most Options.Rounds rounds (64) and
// begins none once its budget (500 ms) is spent; the first always runs,
// and a call under way is waited for (a flush cannot be interrupted), so
// it costs at most the budget, one round, and the fixed calls around
// them, as long as each call returns. One that never does (a flush on a
// failing device) holds the probe for ever: a caller that must go on
// runs it in a goroutine, stops waiting after a bound, and names the
// call under way (Watch). The clock is Options.Now, so tests drive the
// budget.
//
// # Its files
//
// It writes only its own two files in the directory's top level, named
// wire.DiskCheckProbePrefix and a random id (and wire.DiskCheckEntrySuffix
// for the second): the file it writes and syncs, locked (vfs.FS.Lock)
// while the probe runs, and the entry it creates and removes. It removes
// both before it returns, whatever failed, and syncs the directory. A
// crash can leave them; the next probe removes every file bearing the
// prefix whose lock no live probe holds, taking that lock itself first,
// and a file's entry with it. Two probes of one directory (a node's and
// the command's) leave each other's be: a probe uses its file only once
// it has made sure, its lock held, that the name is still that file, so
// a cleanup that took the file between its create and its lock costs it
// a new name, not a finding (files.go says why). Nothing else in a
// data directory bears the prefix, and nothing of the engine reads the
// directory's top level but by the names it owns, so a leftover is never
// taken for data.
package diskcheck
