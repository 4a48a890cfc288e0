// Package fsys is the one seam through which every file operation of the
// project goes: open and create with the engine's modes,
// read, write, pread, pwrite, fdatasync, truncate, rename, remove, mkdir,
// readdir, stat, directory fsync and page-cache eviction.
//
// It has two implementations of FS:
//
//   - OS, the real one: package os plus golang.org/x/sys/unix (Fdatasync,
//     Fsync of a directory, Fadvise). Files are created 0600 and directories
//     0700 exactly, whatever the umask, and only when this call created them.
//   - Disk, a simulated disk for tests. Per file it keeps the page cache,
//     the media, and the changes made since the last sync; per directory the
//     names the process sees and the names a power loss would leave. Crash
//     builds the state after a power loss: unsynced changes dropped, kept,
//     or torn at 512-byte sectors (a chosen or seeded-random subset of the
//     sectors, the new size reaching the media with or without its data,
//     zeros or garbage where the data did not), and namespace changes lost
//     unless their directory was synced (or a chosen prefix of them kept).
//     ProcessCrash keeps everything a living kernel keeps. Inject fails a
//     call (ENOSPC, EIO, a short write, any error) on its Nth matching
//     occurrence by operation, path and byte range, or makes an fdatasync
//     lie (success, nothing persisted); a failing fdatasync marks the dirty
//     pages clean as Linux does, so reads still see bytes a crash will lose.
//     SetHook runs a function before every call, to trace, delay or block it.
//
// No call syncs a directory by itself: callers sync what must survive, and
// the simulated disk's crash images are how the tests prove they did.
// WriteFileAtomic and RemoveDurable are the two such sequences most callers
// need.
package fsys
