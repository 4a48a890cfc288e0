package wire

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Names of files and directories. Part of the on-disk format.
const (
	// TopicsDirName is the directory under the data directory that holds
	// one directory per topic.
	TopicsDirName = "topics"
	// LostDirName is the directory under the data directory that holds
	// the copies a node set aside (never served, never removed by the
	// node): lost/<topic>.<incarnation>/<partition dir>.<unix ms>, a
	// partition an operator reassigned while the node was marked lost.
	LostDirName = "lost"
	// IncarnationFileName is the incarnation marker in a topic directory.
	IncarnationFileName = "incarnation"
	// IncarnationCopyFileName is the marker's copy, written after it with
	// the same content: one damaged file leaves the other.
	IncarnationCopyFileName = "incarnation.copy"
	// HWMFileName is the 8-byte high watermark file in a partition directory.
	HWMFileName = "hwm"
	// ConsumerOffsetFileName is the 8-byte committed consumer frontier.
	ConsumerOffsetFileName = "consumer.offset"
	// ConsumerAheadFileName is the two-slot consumer frontier and acked-ahead set.
	ConsumerAheadFileName = "consumer.ahead"
	// ConsumerAckedFileName is the whole acked-ahead set a clean close
	// left when consumer.ahead's slot could hold only its lowest offsets.
	ConsumerAckedFileName = "consumer.acked"
	// ConsumerLeaseFileName is the queue's lease id floor: every lease id
	// given for the partition is at most the floor it holds.
	ConsumerLeaseFileName = "consumer.lease"
	// CursorFilePrefix begins the name of a fan-out cursor's position
	// file in a partition directory: the prefix, then the cursor's name.
	// The file holds two checksummed slots (cursorfile.go), or, written
	// by an older release, consumer.offset's 8-byte format.
	CursorFilePrefix = "cursor."
	// CursorTempFilePrefix begins the name of the temporary file that
	// replaces a whole cursor file (an older-format or damaged one): the
	// prefix, then the cursor's name. Never a cursor's file (it does not
	// begin with CursorFilePrefix); one a crash left is removed by the
	// next replace or the cursor's delete.
	CursorTempFilePrefix = "cursor-new."
	// SegmentFileSuffix ends every segment file name.
	SegmentFileSuffix = ".log"
	// LockFileName is the data directory's lock file: one process at a
	// time holds an exclusive lock on it, and writes its pid in it.
	LockFileName = "LOCK"
	// NodeIDFileName holds a cluster node's id in its data directory,
	// written at its first start and checked at every start after;
	// ClusterIDFileName holds the id of the cluster it belongs to.
	NodeIDFileName    = "node-id"
	ClusterIDFileName = "cluster-id"
	// DiskCheckProbePrefix begins the name of the disk check's probe
	// files in the data directory's top level (DiskCheckProbePrefix, a
	// random id, and for its second file DiskCheckEntrySuffix): never
	// data, nothing but the disk check reads them, and the next check
	// removes one a crash left.
	DiskCheckProbePrefix = "diskcheck-probe."
	DiskCheckEntrySuffix = ".entry"
	// InstallingDirSuffix ends the staging directory of a moved partition
	// while its files are written: never complete, removed at startup.
	InstallingDirSuffix = ".installing"
	// InstallDirSuffix ends the staging directory of a moved partition
	// once every file in it is durable: complete, rolled forward at
	// startup.
	InstallDirSuffix = ".install"
	// ReplacedDirSuffix ends the name a partition directory has while an
	// install replaces it: removed once the install is durable.
	ReplacedDirSuffix = ".replaced"
	// DroppedDirSuffix ends the name a partition directory has while it
	// is removed (its node no longer owns it): removed at startup.
	DroppedDirSuffix = ".dropped"
	// StaleDirInfix separates a topic name and an incarnation id in the name
	// of a quarantined topic directory.
	StaleDirInfix = ".stale-"

	// MaxTopicNameLen bounds a topic name.
	MaxTopicNameLen = 200
	// MaxCursorNameLen bounds a fan-out cursor's name.
	MaxCursorNameLen = 100
	// MaxPartitions bounds partition numbers: 0 to MaxPartitions-1, five
	// digits in a directory name.
	MaxPartitions = 100000

	segmentDigits   = 20
	partitionPrefix = "p"
	partitionDigits = 5
)

// SegmentFileName is the name of the segment whose first record has offset
// firstOffset: 20 zero-padded decimal digits and ".log". A negative offset
// is ErrInvalidInput.
func SegmentFileName(firstOffset int64) (string, error) {
	if firstOffset < 0 {
		return "", fmt.Errorf("%w: segment file name: negative first offset %d", ErrInvalidInput, firstOffset)
	}
	return fmt.Sprintf("%020d%s", firstOffset, SegmentFileSuffix), nil
}

// ParseSegmentFileName returns the first offset a segment file name
// carries. It accepts exactly 20 ASCII digits and ".log", with a value up to
// math.MaxInt64; anything else is ErrBadName.
func ParseSegmentFileName(name string) (int64, error) {
	digits, ok := strings.CutSuffix(name, SegmentFileSuffix)
	if !ok || len(digits) != segmentDigits || !allDigits(digits) {
		return 0, fmt.Errorf("%w: segment file name %.64q: want %d digits and %q", ErrBadName, name, segmentDigits, SegmentFileSuffix)
	}
	value, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || value > math.MaxInt64 {
		return 0, fmt.Errorf("%w: segment file name %q: offset over int64", ErrBadName, name)
	}
	return int64(value), nil
}

// PartitionDirName is the directory name of partition p: "p" and five
// zero-padded digits. p outside 0..MaxPartitions-1 is ErrInvalidInput.
func PartitionDirName(p int) (string, error) {
	if p < 0 || p >= MaxPartitions {
		return "", fmt.Errorf("%w: partition directory name: partition %d outside 0..%d", ErrInvalidInput, p, MaxPartitions-1)
	}
	return fmt.Sprintf("%s%05d", partitionPrefix, p), nil
}

// ParsePartitionDirName returns the partition a directory name carries:
// exactly "p" and five ASCII digits. Anything else is ErrBadName.
func ParsePartitionDirName(name string) (int, error) {
	digits, ok := strings.CutPrefix(name, partitionPrefix)
	if !ok || len(digits) != partitionDigits || !allDigits(digits) {
		return 0, fmt.Errorf("%w: partition directory name %.64q: want %q and %d digits", ErrBadName, name, partitionPrefix, partitionDigits)
	}
	p := 0
	for i := range len(digits) {
		p = p*10 + int(digits[i]-'0')
	}
	return p, nil
}

// ValidateTopicName checks the topic name rule: 1 to 200 characters of
// [A-Za-z0-9._-], not "." or "..", not containing ".stale-" (reserved for
// quarantined directories). ErrBadName otherwise.
func ValidateTopicName(name string) error {
	if len(name) == 0 || len(name) > MaxTopicNameLen {
		return fmt.Errorf("%w: topic name %.64q: %d characters, want 1 to %d", ErrBadName, name, len(name), MaxTopicNameLen)
	}
	for i := range len(name) {
		if !isTopicChar(name[i]) {
			return fmt.Errorf("%w: topic name %.64q: byte %d (0x%02x) is not one of [A-Za-z0-9._-]", ErrBadName, name, i, name[i])
		}
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: topic name %q", ErrBadName, name)
	}
	if strings.Contains(name, StaleDirInfix) {
		return fmt.Errorf("%w: topic name %q contains %q, reserved for quarantined directories", ErrBadName, name, StaleDirInfix)
	}
	return nil
}

// ValidateCursorName checks a fan-out cursor's name: 1 to 100 characters
// of [A-Za-z0-9._-], not "." or "..". ErrBadName otherwise.
func ValidateCursorName(name string) error {
	if len(name) == 0 || len(name) > MaxCursorNameLen {
		return fmt.Errorf("%w: cursor name %.64q: %d characters, want 1 to %d", ErrBadName, name, len(name), MaxCursorNameLen)
	}
	for i := range len(name) {
		if !isTopicChar(name[i]) {
			return fmt.Errorf("%w: cursor name %.64q: byte %d (0x%02x) is not one of [A-Za-z0-9._-]", ErrBadName, name, i, name[i])
		}
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: cursor name %q", ErrBadName, name)
	}
	return nil
}

// CursorFileName is the position file of cursor name in a partition
// directory; the name must be valid (ErrBadName otherwise).
func CursorFileName(name string) (string, error) {
	if err := ValidateCursorName(name); err != nil {
		return "", err
	}
	return CursorFilePrefix + name, nil
}

// CursorTempFileName is the temporary file that replaces cursor name's
// whole file; the name must be valid (ErrBadName otherwise).
func CursorTempFileName(name string) (string, error) {
	if err := ValidateCursorName(name); err != nil {
		return "", err
	}
	return CursorTempFilePrefix + name, nil
}

// ParseCursorFileName returns the cursor a position file belongs to; ok
// is false for any name CursorFileName cannot produce.
func ParseCursorFileName(file string) (name string, ok bool) {
	name, found := strings.CutPrefix(file, CursorFilePrefix)
	if !found || ValidateCursorName(name) != nil {
		return "", false
	}
	return name, true
}

// StaleDirName is the name a topic directory is renamed to when it is
// quarantined as the leftover of incarnation id: topic + ".stale-" + id.
// Both must be valid (ErrInvalidInput otherwise), so the name parses back.
func StaleDirName(topic string, id IncarnationID) (string, error) {
	if err := ValidateTopicName(topic); err != nil {
		return "", fmt.Errorf("%w: stale directory name: %s", ErrInvalidInput, err)
	}
	if _, err := ParseIncarnationID(string(id)); err != nil {
		return "", fmt.Errorf("%w: stale directory name: %s", ErrInvalidInput, err)
	}
	return topic + StaleDirInfix + string(id), nil
}

// ParseStaleDirName splits a quarantined directory name into its topic and
// incarnation id. ok is false for any name StaleDirName cannot produce,
// which includes every valid topic name.
func ParseStaleDirName(name string) (topic string, id IncarnationID, ok bool) {
	topic, idText, found := strings.Cut(name, StaleDirInfix)
	if !found || ValidateTopicName(topic) != nil {
		return "", "", false
	}
	id, err := ParseIncarnationID(idText)
	if err != nil {
		return "", "", false
	}
	return topic, id, true
}

func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isTopicChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}
