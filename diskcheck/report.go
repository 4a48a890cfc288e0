package diskcheck

import (
	"time"

	"github.com/narad-io/storage/vfs"
)

// Severity is how much a finding matters.
type Severity string

// The severities, from least to most.
const (
	// Skipped: the check could not run (what it needs could not be had:
	// a probe file that could not be created, a file system that cannot
	// be described); the finding says why.
	Skipped Severity = "skipped"
	// OK: nothing to do.
	OK Severity = "ok"
	// Warning: the node serves, but what the finding names weakens its
	// durability or its performance; the operator should look.
	Warning Severity = "warning"
	// Error: the node cannot do its work here as configured: a write,
	// fdatasync or directory fsync failed, or the free space is under
	// its floor.
	Error Severity = "error"
)

// The checks, each with one finding in every report, in the order of
// Checks.
const (
	CheckFSType      = "fs_type"     // the file system's type
	CheckFdatasync   = "fdatasync"   // a 4 KiB write's fdatasync, after an append and after an overwrite
	CheckDirFsync    = "dir_fsync"   // a directory's fsync after a create and after a remove
	CheckFallocate   = "fallocate"   // a reservation past the end, as a busy partition makes
	CheckFreeBytes   = "free_bytes"  // free space against the floor
	CheckFreeInodes  = "free_inodes" // free inodes against the floor
	CheckDescriptors = "descriptors" // the open-file limit against the open-log budget
	CheckProbeFiles  = "probe_files" // the probe's own files: a crash's leftovers removed, its own removed
)

// Checks lists every check, in the order a report gives them.
var Checks = []string{CheckFSType, CheckFdatasync, CheckDirFsync, CheckFallocate, CheckFreeBytes, CheckFreeInodes, CheckDescriptors, CheckProbeFiles}

// Finding is one check's verdict.
type Finding struct {
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
	Fix      string   `json:"fix,omitempty"` // what to do or check, for a warning or an error
}

// Latency sums up one kind of flush's samples.
type Latency struct {
	Samples       int
	P50, P99, Max time.Duration
	// Err is the failed call that ended the probe's rounds; nil if none
	// failed.
	Err error
}

// Descriptors is the open-file limit against the open-log budget, as the
// node computes them (the caller does: package server, with package
// runtime's sum).
type Descriptors struct {
	Limit    uint64 // the soft open-file limit (RLIMIT_NOFILE); Unlimited when none
	OpenLogs int    // the open-log budget; 0 or less: none
	Needed   uint64 // descriptors the budget needs: its logs', the headroom, the connections'
}

// Unlimited is a Descriptors.Limit without a bound (RLIM_INFINITY).
const Unlimited = ^uint64(0)

// Report is what one probe measured and found.
//
// Invariants: Findings holds one finding per check, in the order of
// Checks; a check that could not run is Skipped, never absent.
type Report struct {
	Dir string
	// FS is the file system holding Dir; FSErr why it could not be
	// described (then FS is zero).
	FS    vfs.FSInfo
	FSErr error

	// Append is the fdatasync after a 4 KiB write past the end (it must
	// journal the new size and blocks), Overwrite after a 4 KiB write over
	// a block written and synced before (data only), DirFsync a
	// directory's fsync after a create and after a remove in it.
	Append, Overwrite, DirFsync Latency
	// CreateErr is why the probe file could not be created: then no
	// flush, fsync or reservation was measured.
	CreateErr error
	// Fallocate is whether a reservation past the end (fallocate with
	// FALLOC_FL_KEEP_SIZE) worked; FallocateErr what it failed with.
	Fallocate    bool
	FallocateErr error

	// Free is what the file system has left, FreeErr why it could not be
	// read; MinFreeBytes and MinFreeInodes the node's floors (0: off).
	Free                        vfs.Space
	FreeErr                     error
	MinFreeBytes, MinFreeInodes uint64

	// Descriptors is the open-file limit against the budget; nil when the
	// caller gave none to check.
	Descriptors *Descriptors

	// LeftoversRemoved counts probe files a crashed probe had left, which
	// this one removed; CleanupErr is a probe file (a leftover, or this
	// probe's own) that could not be removed.
	LeftoversRemoved int
	CleanupErr       error

	// Rounds is how many rounds of samples ran, of RoundsPlanned; fewer
	// when the budget was spent (BudgetSpent) or the context ended.
	Rounds, RoundsPlanned int
	Budget                time.Duration
	BudgetSpent           bool
	// Duration is the whole probe's time, its file system calls, cleanup
	// and all; Ended when it ended (both on Options.Now).
	Duration time.Duration
	Ended    time.Time

	Findings []Finding

	memoryFSIsError bool // Options.MemoryFSIsError, for judge
}

// Count is the number of findings of a severity.
func (r Report) Count(s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// Finding is the finding of a check (one of Checks).
func (r Report) Finding(check string) (Finding, bool) {
	for _, f := range r.Findings {
		if f.Check == check {
			return f, true
		}
	}
	return Finding{}, false
}
