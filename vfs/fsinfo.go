package vfs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// FSInfo describes the file system that holds a path, as far as the
// kernel tells: its type, and what the block device under it says of its
// write cache. The disk check (package diskcheck) judges a data
// directory's durability with it.
type FSInfo struct {
	// Type names statfs's f_type: "ext2/3/4" (one number for the three),
	// "xfs", "btrfs", "tmpfs", "overlayfs", "nfs", ...; a number the table
	// does not name is written in hex ("0x1234abcd").
	Type  string
	Magic uint32
	// Device is the block device's "major:minor"; "" when the file system
	// has none of its own (tmpfs, overlayfs, a network file system, a
	// btrfs subvolume: an anonymous device).
	Device string
	// WriteCache is what the device says of its cache (sysfs's
	// queue/write_cache): WriteBack (a volatile cache: the kernel sends a
	// cache flush with every fdatasync), WriteThrough (none, or one the
	// device says survives a power loss: no flush is sent); "" unknown.
	WriteCache string
}

// The values of FSInfo.WriteCache, as sysfs writes them.
const (
	WriteBack    = "write back"
	WriteThrough = "write through"
)

// FSDescriber is implemented by an FS that can describe the file system
// holding a path. OS does; to the disk check, the file system of an FS
// that does not is of unknown type.
type FSDescriber interface {
	DescribeFS(name string) (FSInfo, error)
}

// DescribeFS implements FSDescriber: statfs for the type, stat for the
// device, and sysfs (/sys/dev/block/MAJOR:MINOR, or its disk's for a
// partition) for the write cache. Only statfs and stat can fail it; a
// sysfs that cannot be read leaves WriteCache unknown.
func (OS) DescribeFS(name string) (FSInfo, error) {
	var st unix.Statfs_t
	if err := retryEINTR(func() error { return unix.Statfs(name, &st) }); err != nil {
		return FSInfo{}, &fs.PathError{Op: "statfs", Path: name, Err: err}
	}
	magic := uint32(st.Type) // every f_type is a 32-bit number; Type is signed on some architectures
	info := FSInfo{Type: FSTypeName(magic), Magic: magic}
	var s unix.Stat_t
	if err := retryEINTR(func() error { return unix.Stat(name, &s) }); err != nil {
		return FSInfo{}, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	major, minor := unix.Major(uint64(s.Dev)), unix.Minor(uint64(s.Dev))
	if major == 0 {
		return info, nil // an anonymous device: no block device of its own
	}
	info.Device = fmt.Sprintf("%d:%d", major, minor)
	info.WriteCache = writeCacheOf(info.Device)
	return info, nil
}

// writeCacheOf reads a block device's queue/write_cache; a partition has
// none of its own, its disk's (the parent in sysfs) is the one.
func writeCacheOf(device string) string {
	dir, err := filepath.EvalSymlinks(filepath.Join("/sys/dev/block", device))
	if err != nil {
		return ""
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		b, err := os.ReadFile(filepath.Join(d, "queue", "write_cache"))
		if err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}

// fsTypes names the statfs f_type numbers (linux/magic.h, and ZFS's own)
// of the file systems a data directory may lie on.
var fsTypes = map[uint32]string{
	0xEF53:     "ext2/3/4",
	0x58465342: "xfs",
	0x9123683E: "btrfs",
	0x2FC12FC1: "zfs",
	0xF2F52010: "f2fs",
	0xCA451A4E: "bcachefs",
	0x01021994: "tmpfs",
	0x858458F6: "ramfs",
	0x794C7630: "overlayfs",
	0x61756673: "aufs",
	0x6969:     "nfs",
	0xFF534D42: "cifs",
	0xFE534D42: "smb2",
	0x517B:     "smb",
	0x65735546: "fuse",
	0x01021997: "9p",
	0x00C36400: "ceph",
	0x01161970: "gfs2",
	0x7461636F: "ocfs2",
	0x73717368: "squashfs",
	0x4D44:     "vfat",
	0x2011BAB0: "exfat",
	0x5346544E: "ntfs",
	0xF15F:     "ecryptfs",
}

// FSTypeName names a statfs f_type number, in hex when the table does not
// know it.
func FSTypeName(magic uint32) string {
	if name, ok := fsTypes[magic]; ok {
		return name
	}
	return fmt.Sprintf("%#x", magic)
}
