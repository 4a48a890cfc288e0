// Package bench is the load harness of Narad storage: workloads that
// measure the engine side by side with the raw disk and with the engines a
// user would pick instead, all in one run, so every figure can be quoted as
// a ratio to a baseline measured on the same machine at the same time
// (these machines are shared and noisy: absolute times drift).
//
// The suites:
//   - engine: the same commit workload through every Engine (Engines):
//     records of 256 B (JSON-like) and 4 KiB in batches of 1 to 4096, each
//     batch durable before the next; commits/s and records/s against a
//     plain append + fdatasync of the same bytes ("raw") and against the
//     best peer, then a read back of everything written (warm page cache),
//     MB/s against a plain sequential read of the raw file;
//   - producers: commits of one small record from 1 to 64 producers at
//     once through the engines that take concurrent commits
//     (ConcurrentEngines): group commit against pebble's;
//   - read: narad catch-up reads of cold segments (pages dropped) and of
//     cached ones, in rounds beside a plain read, each first in turn
//     (the median of the rounds' ratios), and tail reads through the
//     frame cache;
//   - open: a log's open time and allocations, after a clean close and
//     after a crash, against the size of its active segment and its
//     sealed history (which it should not depend on);
//   - partitions: a node with 1,000 and 10,000 open partitions: idle CPU,
//     memory and descriptors a partition, and the commits/s of many
//     partitions producing at once;
//   - http: narad-storaged through the Go client: producers x partitions
//     x batch in a closed loop, an open loop at 80% of its rate (latency
//     corrected for coordinated omission), and produce to fetch through
//     long polls.
//
// Every engine reads back what it wrote and compares it with what was
// written: a missing, extra or wrong record fails the run (Verifier). The
// command is cmd/narad-bench; docs/performance.md has the latest full run.
//
// This is a module of its own so the root module's go.mod never names a
// peer engine.
package bench
