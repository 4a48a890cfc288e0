package diskcheck

// The verdicts: what each check's measurement means, with the thresholds
// and the reasons for them (docs/operations.md, "Disk check", says the
// same for the operator).

import (
	"errors"
	"fmt"
	"math"
	"syscall"
	"time"

	"github.com/narad-io/storage/vfs"
)

// FastFlush is the p50 fdatasync under which a flush is implausibly fast
// for a device with a volatile write cache. Such a device's fdatasync
// writes the block (and, after an append, the journal's commit of the
// new size) and then waits for a cache flush that puts it on
// non-volatile media: a SATA SSD's takes a millisecond or more, an NVMe
// drive's without power-loss protection hundreds of microseconds, a
// spinning disk's milliseconds. Under 50 us the flush was answered from
// memory that a power loss empties (a tmpfs, a drive or controller that
// ignores flushes, a hypervisor that caches the virtual disk), or never
// asked for (an ext4 mounted nobarrier or barrier=0 sends no cache
// flush; a ZFS dataset with sync=disabled answers fsync at once), or by a
// device whose cache survives a power loss (power-loss protection),
// which reports a write-back cache all the same: this heuristic cannot
// tell those apart, only say where to look. A device that says its cache
// is write-through is taken at its word (the kernel sends it no flush).
const FastFlush = 50 * time.Microsecond

// judge gives each check its finding, in the order of Checks.
func judge(r Report) []Finding {
	return []Finding{
		judgeFSType(r), judgeFdatasync(r), judgeDirFsync(r), judgeFallocate(r),
		judgeFloor(CheckFreeBytes, r.FreeErr, r.Free.Bytes, r.MinFreeBytes, bytesText, "--min-free-bytes"),
		judgeFloor(CheckFreeInodes, r.FreeErr, r.Free.Inodes, r.MinFreeInodes, inodesText, "--min-free-inodes"),
		judgeDescriptors(r.Descriptors), judgeProbeFiles(r),
	}
}

// memoryFS are the file systems that keep their files in memory only.
var memoryFS = map[string]bool{"tmpfs": true, "ramfs": true}

// fsKinds are the file systems whose fsync the check doubts, and why.
var fsKinds = map[string]struct{ why, fix string }{
	"tmpfs": {"a tmpfs keeps its files in memory only: fsync persists nothing, and every record is gone at a reboot or a power loss",
		"put the data directory on a disk's file system (ext4, xfs)"},
	"ramfs": {"a ramfs keeps its files in memory only: fsync persists nothing, and every record is gone at a reboot or a power loss",
		"put the data directory on a disk's file system (ext4, xfs)"},
	"overlayfs": {"an overlay (a container's writable layer): fsync reaches whatever file system holds its upper layer (a tmpfs, maybe), and the layer goes with its container",
		"mount a volume at the data directory (a host directory on ext4 or xfs)"},
	"aufs": {"an overlay (a container's writable layer): fsync reaches whatever file system holds its upper layer, and the layer goes with its container",
		"mount a volume at the data directory (a host directory on ext4 or xfs)"},
	"nfs": {"a network file system: an fsync is as durable as its server makes it (an export with async acknowledges writes it has not stored), and the data directory's lock is only as good as the server's locking",
		"use a local disk; else check the export is sync and the mount hard, not soft"},
	"cifs": {"a network file system: an fsync is as durable as its server makes it, and the data directory's lock is only as good as the server's locking",
		"use a local disk"},
	"smb2": {"a network file system: an fsync is as durable as its server makes it, and the data directory's lock is only as good as the server's locking",
		"use a local disk"},
	"smb": {"a network file system: an fsync is as durable as its server makes it", "use a local disk"},
	"9p": {"a file system shared from a host (9p): its fsync is what the host's server makes of it, often nothing",
		"use a local disk, or a block device the host gives the guest"},
	"fuse": {"a file system in user space: its fsync is whatever its daemon does with it",
		"use a local disk's file system, or check what the FUSE file system does on fsync"},
	"vfat": {"vfat has no journal: a power loss during a create, rename or remove can damage the directory, and fsck may take files away",
		"use a journaled file system (ext4, xfs)"},
	"exfat": {"exfat has no journal: a power loss during a create, rename or remove can damage the directory",
		"use a journaled file system (ext4, xfs)"},
}

// diskFileSystems are the file systems of local block devices that keep
// fsync's promise (as far as their device does).
var diskFileSystems = map[string]bool{"ext2/3/4": true, "xfs": true, "btrfs": true, "zfs": true, "f2fs": true, "bcachefs": true}

func judgeFSType(r Report) Finding {
	f := Finding{Check: CheckFSType}
	if r.FSErr != nil {
		f.Severity, f.Message = Skipped, fmt.Sprintf("cannot tell: %v", r.FSErr)
		return f
	}
	if kind, ok := fsKinds[r.FS.Type]; ok {
		f.Severity, f.Message, f.Fix = Warning, r.FS.Type+": "+kind.why, kind.fix
		if memoryFS[r.FS.Type] && r.memoryFSIsError {
			f.Severity = Error
		}
		return f
	}
	if diskFileSystems[r.FS.Type] {
		f.Severity, f.Message = OK, fmt.Sprintf("%s: a disk's file system, whose fsync persists what the device does", r.FS.Type)
		return f
	}
	f.Severity, f.Message = OK, fmt.Sprintf("%s: not a type this check knows; its fsync is taken at its word", r.FS.Type)
	return f
}

func judgeFdatasync(r Report) Finding {
	f := Finding{Check: CheckFdatasync}
	switch {
	case r.CreateErr != nil:
		f.Severity, f.Message = Error, fmt.Sprintf("cannot create a file in %s: %v; the node cannot write there", r.Dir, r.CreateErr)
		f.Fix = "check the directory's owner, mode and mount (read-only?)"
		return f
	case r.Append.Err != nil || r.Overwrite.Err != nil:
		f.Severity = Error
		f.Message = fmt.Sprintf("a 4 KiB write or its fdatasync failed: %v; the node's commits would fail here", errors.Join(r.Append.Err, r.Overwrite.Err))
		f.Fix = "check the kernel log (dmesg) for the device's errors, and the free space"
		return f
	case r.Append.Samples == 0:
		f.Severity, f.Message = Skipped, "no sample taken"
		return f
	}
	fastest := min(r.Append.P50, r.Overwrite.P50)
	if r.Overwrite.Samples == 0 {
		fastest = r.Append.P50
	}
	measured := fmt.Sprintf("p50 %s after an append, %s after an overwrite", durText(r.Append.P50), durText(r.Overwrite.P50))
	switch {
	case r.FS.WriteCache == vfs.WriteThrough:
		f.Severity = OK
		f.Message = measured + fmt.Sprintf("; the device %s says it has no volatile write cache (write through), so no flush is sent: durability rests on that claim", r.FS.Device)
	case fastest < FastFlush:
		f.Severity = Warning
		f.Message = measured + fmt.Sprintf(": implausibly fast (under %s) for a device that flushes a volatile cache; the flush was answered from memory a power loss empties", durText(FastFlush))
		const plp = "check the drive has power-loss protection (its data sheet; nvme id-ctrl's vwc, hdparm -W: its write cache); on a virtual machine, that the host caches the disk writethrough or not at all (cache=none), never unsafe"
		switch {
		case r.FS.Device != "":
			f.Message += ", unless the device has power-loss protection; or the file system sends no flush (an ext4 mounted nobarrier or barrier=0)"
			f.Fix = plp + "; and the mount options (findmnt -no OPTIONS on the data directory): remove nobarrier or barrier=0"
		case r.FS.Type == "btrfs":
			f.Message += ", unless its devices have power-loss protection (btrfs spreads over devices of its own, none a single block device to ask)"
			f.Fix = "check each device under it (btrfs filesystem show): " + plp
		case r.FS.Type == "zfs":
			f.Message += ", unless its devices have power-loss protection; or the dataset does not sync (zfs sync=disabled acknowledges every fsync at once)"
			f.Fix = "check the dataset is not sync=disabled (zfs get sync: standard or always), then each device of the pool (zpool status): " + plp
		default:
			f.Message += " (no block device of its own was found under this file system)"
			f.Fix = "see fs_type: put the data directory on a local disk's file system"
		}
	default:
		f.Severity, f.Message = OK, measured
	}
	return f
}

func judgeDirFsync(r Report) Finding {
	f := Finding{Check: CheckDirFsync}
	switch {
	case r.DirFsync.Err != nil:
		f.Severity = Error
		f.Message = fmt.Sprintf("a create, remove or directory fsync failed: %v; the node syncs its directories after every create, rename and remove, and would fail here", r.DirFsync.Err)
		f.Fix = "a file system that cannot fsync a directory cannot hold a data directory: use a local one (ext4, xfs)"
	case r.DirFsync.Samples == 0:
		f.Severity, f.Message = Skipped, "no sample taken"
	default:
		f.Severity = OK
		f.Message = fmt.Sprintf("p50 %s, p99 %s, max %s", durText(r.DirFsync.P50), durText(r.DirFsync.P99), durText(r.DirFsync.Max))
	}
	return f
}

func judgeFallocate(r Report) Finding {
	f := Finding{Check: CheckFallocate}
	switch {
	case r.Fallocate:
		f.Severity, f.Message = OK, "reserves blocks past the end (FALLOC_FL_KEEP_SIZE), as a busy partition does after a large frame"
	case r.FallocateErr == nil:
		f.Severity, f.Message = Skipped, "not tried: the probe file could not be written"
	case errors.Is(r.FallocateErr, syscall.EOPNOTSUPP) || errors.Is(r.FallocateErr, syscall.ENOSYS):
		f.Severity = Warning
		f.Message = fmt.Sprintf("unsupported (%v): a busy partition's large commits allocate their blocks as they write them, which is slower; nothing is lost", r.FallocateErr)
		f.Fix = "none needed for correctness; a file system with fallocate (ext4, xfs) commits large batches faster"
	default:
		f.Severity = Warning
		f.Message = fmt.Sprintf("failed: %v; a busy partition's reservations would fail the same way (they are optional: nothing is lost)", r.FallocateErr)
		f.Fix = "check the free space and the kernel log"
	}
	return f
}

func judgeFloor(check string, err error, free, floor uint64, text func(uint64) string, flag string) Finding {
	f := Finding{Check: check}
	switch {
	case err != nil:
		f.Severity, f.Message = Error, fmt.Sprintf("statfs failed: %v; the node reads the free space before every commit", err)
	case floor == 0:
		f.Severity, f.Message = OK, fmt.Sprintf("%s free; no floor (%s 0)", text(free), flag)
	case free < floor:
		f.Severity = Error
		f.Message = fmt.Sprintf("%s free, under the floor of %s: every produce is refused (507 no_space)", text(free), text(floor))
		f.Fix = fmt.Sprintf("free space on the file system, shorten a topic's retention, or lower %s", flag)
	default:
		f.Severity, f.Message = OK, fmt.Sprintf("%s free, floor %s", text(free), text(floor))
	}
	return f
}

func judgeDescriptors(d *Descriptors) Finding {
	f := Finding{Check: CheckDescriptors}
	switch {
	case d == nil:
		f.Severity, f.Message = Skipped, "no open-log budget given to check"
	case d.OpenLogs <= 0:
		f.Severity, f.Message = OK, fmt.Sprintf("open-file limit %s; no open-log budget (--max-open-logs -1): every partition may stay open", limitText(d.Limit))
	case d.Limit < d.Needed:
		f.Severity = Warning
		f.Message = fmt.Sprintf("open-file limit %s, under the %d the open-log budget of %d logs needs: an open past the limit fails (503 busy) before the budget closes an idle log", limitText(d.Limit), d.Needed, d.OpenLogs)
		f.Fix = fmt.Sprintf("raise the open-file limit (LimitNOFILE= in the unit, ulimit -n) to %d, or lower --max-open-logs", d.Needed)
	default:
		f.Severity, f.Message = OK, fmt.Sprintf("open-file limit %s holds the open-log budget of %d logs (%d descriptors)", limitText(d.Limit), d.OpenLogs, d.Needed)
	}
	return f
}

func judgeProbeFiles(r Report) Finding {
	f := Finding{Check: CheckProbeFiles, Severity: OK, Message: "the probe's files removed"}
	if r.LeftoversRemoved > 0 {
		f.Message = fmt.Sprintf("the probe's files removed, and %d a crashed probe left", r.LeftoversRemoved)
	}
	if r.CleanupErr != nil {
		f.Severity, f.Message = Warning, r.CleanupErr.Error()
		f.Fix = "remove the diskcheck-probe.* files in the directory by hand: they hold no data"
	}
	return f
}

// durText is a duration to three significant digits or so.
func durText(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return d.String()
	case d < time.Millisecond:
		return d.Round(100 * time.Nanosecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}

func bytesText(n uint64) string {
	const unit = 1 << 10
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

func inodesText(n uint64) string {
	if n == math.MaxUint64 {
		return "inodes without bound (no inode table)"
	}
	return fmt.Sprintf("%d inodes", n)
}

func limitText(n uint64) string {
	if n == Unlimited {
		return "unlimited"
	}
	return fmt.Sprint(n)
}
