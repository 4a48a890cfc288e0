// Package tool reads a data directory offline, the way an operator debugs
// a disk: Verify is an fsck of a whole data directory, Inspect a dump of
// one segment file. The narad-storaged commands verify and inspect are
// flag parsing around them; a program that embeds the engine calls them
// with its own writers and gets the same output, in text or in JSON, byte
// for byte.
//
// The package owns reading a data directory without a node: it opens
// every file read-only through a vfs.FS and never writes, creates,
// renames or removes anything there, so it is safe on a damaged
// directory and on a copy of one. Its walk of a segment is the engine's
// own (partition.WalkSegment), so what it calls a torn tail or a gap is
// what an open of the log would call one, and the offset Verify says a
// partition goes on at is the one recovery comes to.
//
// # Beside a running node
//
// The tools take no lock, so they run on the data directory of a running
// node too. They ask whether a live process holds the directory's lock
// (datadir.InUse) and, when one does, say so on their Messages
// writer ("verify: warning: DIR is in use by process N; reading anyway,
// but a torn tail may be a write in flight"), and Verify in its report as
// well (a note line in text, in_use_by in JSON): a torn tail read there
// may be a commit still being written. Inspect asks when the segment's
// path lies in a data directory (DIR/topics/TOPIC/pNNNNN/).
//
// # What they report
//
// Verify reports per partition its segments, bytes, frames, records,
// first, last and next offsets, its hwm file, and each problem: a torn
// tail, a gap (offsets lost under a later valid frame), a frame that does
// not decode, a sealed segment that ends early or runs past its
// successor, a damaged hwm file or one past the tail, and what could not
// be read. It lists without checking them the quarantined directories of
// deleted topics and the copies a cluster's node set aside under lost/:
// never served, they are not part of the verdict. Inspect writes one line
// (or JSON object) per frame, the damage where it starts, and with
// Records every record, its key and value shown as text when printable
// and as base64 otherwise.
package tool
