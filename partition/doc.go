// Package partition is one partition's log: a directory of segment files
// holding CRC-checked frames of keyed records, owned by one goroutine, the
// actor (docs/architecture.md, "The shape"). It implements docs/design.md's
// "Segments, frames and records", "Write path", "Commit failure", "Fsync
// failure", "High watermark and hidden tail", "Recovery", "Flusher
// pipeline", "Wake-ups for waiting readers", and the per-log half of
// "Retention".
//
// # Shape
//
// Open recovers the log and starts the actor. Every state change is a typed
// message on a bounded mailbox (append, commit, produce, set retention,
// sweep, close) or a pass of the flusher's timer; the actor handles one at a
// time, so nothing in the write path takes a lock. After every change
// readers can see (a high-watermark advance, a roll, a retention detach, a
// close) the actor publishes an immutable view: the segments, the high
// watermark, the start offset. Read (and ReadFunc, which lends records
// instead of returning them) loads the view and reads frames without
// waiting for the actor; the few things readers change (a sealed
// segment's lazily opened handle and sparse index, the decoded-frame and
// frame-position caches, the hot set) are small structures made for
// concurrent use.
//
// # The durable commit
//
// CommitDurable and Produce drain everything buffered into one frame (the
// codec applied, the CRC over the stored bytes), write it at the end of the
// active segment, fdatasync, read the new frames back through a pooled
// buffer and check each one's CRC and position, and only then advance the
// high watermark and publish. Produce messages waiting together are one
// group: one frame, one write, one fdatasync.
//
// A failed commit (the hwm file release, the write, the fdatasync, the read
// back, a roll before the write) discards everything above the high
// watermark before the error returns: the buffer, the unwritten frame, and
// the written frames, by truncating the active segment back to the high
// watermark's frame boundary and fsyncing the truncate. The next append
// gets the failed batch's offsets, so a retry lands exactly one copy. This
// is always possible because a segment is sealed only when fully
// committed: the high watermark never leaves the active segment. Records an
// Append put in the buffer that another caller's failed commit discarded
// are reported by the next CommitDurable, never silently committed as
// nothing.
//
// A failed fdatasync poisons the log: ErrLogPoisoned, wrapping the cause,
// on every later append and commit until the log is reopened; reads of
// committed records go on. An fsync is never retried.
//
// # Decisions on the risks the design left open (docs/design.md, R1 to R8)
//
// R1, the hwm file at close. The file keeps the design's format (8 bytes,
// written in place at close, fdatasynced; emptied once before the first
// advance after an open). What changes is how open trusts it: the file
// vouches for the boundary only when it equals, exactly, the offset the
// CRC walk of the active segment ends at. Close makes that true: it cuts
// anything written above the high watermark (records nobody was promised)
// before writing the file, so after a clean close the tail is the boundary.
// Any other content (empty, missing, short, garbage, a value above or below
// the tail, as a crash mid-write or a bit flip leaves it) sends open down
// the crash path: fsync the active segment, drop its cached pages, walk it
// again, and take the boundary from the tail. The tail never hides a
// committed record, so no content of the file can hide one; at worst a
// hidden tail left by a crash is exposed, a duplicate the ingress WAL
// already expects. Opening writes nothing on the clean path.
//
// R2, damage in an unsynced window. The flusher never writes a frame while
// an earlier frame of the segment is unsynced: a background drain or a
// commit first syncs the previous frame. So after a crash at most the last
// frame can be unsynced, and a damaged frame followed by a valid one was
// synced before the valid one was written: it is real damage under a
// synced point, and recovery records it as a permanent gap, as the design
// says, without ever mistaking a torn unsynced write for one. Damage with
// no valid frame after it is a torn tail and is truncated (and fsynced).
// Either way no record whose commit returned is lost or reordered; only a
// drive that lied about an fsync can turn its own lost frame into a gap.
// The price is an fsync per background drain when records are appended and
// not committed for longer than a drain interval; commits pay nothing.
// The search for where frames resume never looks inside a damaged frame's
// payload when its header is plausible (a record value may hold bytes that
// form a valid frame), and a plausible uncompressed frame that runs past
// the end of the file is a torn tail outright: its two size fields must
// agree, so rot in one of them makes the header implausible and the byte
// search runs. Rot in both at once, consistently, would make valid frames
// after it look like a torn tail; that is two independent corruptions.
//
// R3, reopen after a failed fdatasync. A poisoned log cuts its active
// segment back to the high watermark at once, which drops from the page
// cache the bytes a failed fdatasync left marked clean. And whenever open
// takes the boundary from the tail it fsyncs, drops the segment's cached
// pages (posix_fadvise DONTNEED) and walks again, so it reads what the
// media holds. The commit read-back reads through the page cache: it proves
// the frame is intact in memory and that the write landed where intended,
// not that the media holds it; the fdatasync before it is what does that.
//
// R5, frame position. Every frame's base offset is checked: the first
// against the segment's name, each next against the previous frame's end,
// in recovery, in the commit read-back and on every read. A CRC-valid frame
// in the wrong place is damage.
//
// R6, lengths. A frame is never read past the bytes left in the file (nor
// past wire.MaxFrameBytes); record counts and lengths are bounded by the
// payload (wire). A header claiming gigabytes near the end of a file reads
// as torn without allocating.
//
// R7, directory entries. A new segment's directory is fsynced before
// anything is written to it; the hwm file's directory when close creates
// it; the partition directory's parent when open creates the log; the
// directory after retention unlinks.
//
// R8, a crash inside recovery. Recovery's only writes are the torn-tail
// truncate and fsyncs; the walk that decides them reads only the media, so
// a crash at any point of them leads the next open to the same decision and
// the same state.
//
// # Sealed segments
//
// Recovery walks only the active segment; a sealed segment is stat'ed, not
// opened, and its range ends at its successor's base offset. Its handle is
// opened by the first read and dropped, with its sparse index, when it
// leaves the two-segment hot set. Damage in a sealed segment is found by
// the read that lands on it: that read fails with an *UnreadableError
// naming the next readable offset; an I/O error fails only the reads that
// need the segment.
//
// # Flusher
//
// Appended records are drained into a frame at 1 MiB, 1,000 records or
// 100 ms after the first of them, and written frames are synced 1 s after
// the first unsynced write (or sooner, see R2). The actor holds a timer only
// while a pass is owed (needsTimer): an idle log holds none and costs no
// CPU.
package partition
