// Package scrub is the background scrubber (docs/design.md, "Scrubber"):
// a supervised walk, at a bounded rate in bytes per second, over every
// sealed segment of every partition this node owns, open or closed, that
// checks every frame's CRC and position with the decoder recovery, reads
// and verify use (partition.WalkSegment), so rot in a segment nobody
// reads is found before a consumer meets it.
//
// This package owns the walk, its pacing (pacer: bytes are paid for
// before they are read, and idle time earns no burst), the files' page
// cache hints, the progress file (scrub.progress in each partition
// directory: where the pass under way stands and when the last one ended,
// so a restart resumes there), what a finding becomes (counted, logged
// once with partition, segment and byte range, and handed to the open log
// so its cache no longer serves the range), and the metrics
// (narad_scrub_*). The node owns the rest through the Node interface: the
// assignment, the registry of open logs (looked up, never opened) and the
// topic's guard, under which every progress write runs.
//
// The scrubber never opens a log: it reads segment files straight from
// the partition's directory, as verify and the startup check do, so it
// takes no slot of the open-log budget, evicts nothing and holds no log's
// lock. Its loop is supervisor.StartLoop's, named "scrub", its first pass
// at the start; every paced step, and every second of a wait, beats, so a
// pass at any rate is never taken for stalled.
package scrub
