// Package sim is a simulated disk (Disk, a vfs.FS) for tests of code that
// must survive crashes and failing disks: the engine's own tests, and a
// broker's that embeds it.
//
// Per file it keeps the page cache, the media, and the changes made since
// the last sync; for the namespace, the names the process sees and the
// entries each directory holds on the media. Crash builds the state after
// a power loss: unsynced changes dropped, kept, or torn at 512-byte
// sectors (a chosen or seeded-random subset of the sectors, the new size
// reaching the media with or without its data, zeros or garbage where the
// data did not), and namespace changes lost unless their directory was
// synced (or a chosen prefix of them kept, as a journal commits them in
// order). ProcessCrash keeps everything a living kernel keeps. Inject
// fails a call (ENOSPC, EIO, a short write, any error) on its Nth matching
// occurrence by operation, path and byte range, or makes an fdatasync lie
// (success, nothing persisted); a failing fdatasync marks the dirty pages
// clean as Linux does, so reads still see bytes a crash will lose. SetHook
// runs a function before every call, to trace, delay or block it (Hook
// returns it, so a caller that installs its own for a while can chain and
// restore it).
// SetCapacity bounds the disk's bytes (file contents, and blocks Allocate
// reserved past a file's end until a truncate gives them back, as statfs
// counts them) and inodes; past them a call fails with ENOSPC, and Free
// reports what is left.
//
// A Disk is safe for concurrent use and deterministic from its seed: the
// same history and crash plan give the same image.
package sim
