// Package vfs is the one seam through which every file operation of the
// engine goes: open and create with the engine's modes, read, write,
// pread, pwrite, fdatasync, truncate, rename, remove, mkdir, readdir, stat,
// directory fsync and page-cache eviction. An embedder passes an FS to the
// engine (nil means OS, the real file system), so its tests can run the
// engine on the simulated disk of package vfs/sim: crash images, fault
// injection, hooks that trace, delay or block any call.
//
// OS is the real implementation: package os plus golang.org/x/sys/unix
// (opens, whose blocking descriptors stay out of Go's network poller;
// Fdatasync, Fsync of a directory, Fadvise). Files are created 0600 and
// directories 0700 exactly, whatever the umask, and only when this call
// created them.
//
// No call syncs a directory by itself: callers sync what must survive, and
// the simulated disk's crash images are how the tests prove they did.
// WriteFileAtomic, RemoveDurable and MkdirAllDurable are the sequences
// most callers need.
//
// Beside the seam, OS describes the file system under a path
// (FSDescriber: statfs's type, the block device, and what the device
// says of its write cache), for the disk check; an FS need not.
package vfs
