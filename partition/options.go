package partition

import (
	"time"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/vfs"
	"go.uber.org/zap"
)

// DefaultSegmentMaxBytes caps a segment (docs/design.md, "Segments,
// frames and records").
const DefaultSegmentMaxBytes = 64 << 20

// Options configure a Log; every field has a default.
type Options struct {
	// FS is the file system every file operation goes through. Default:
	// vfs.OS, the real one.
	FS vfs.FS
	// Codec encodes each new frame's payload (storage.codec); frames are
	// read with the codec their flags name. Default: none.
	Codec codec.Codec
	// Dictionaries are the topic's zstd dictionaries: frames of codec
	// zstd-dict are decoded with the one they name (a frame naming one the
	// set lacks is damage, its reason codec.ErrDictionaryMissing), and
	// while the set has a current dictionary, new frames are encoded with
	// it whatever Codec says. Default: none.
	Dictionaries *codec.DictionarySet
	// Logger receives the log's warnings and errors. Default: zap.NewNop().
	Logger *zap.Logger
	// Metrics are shared by every log of a process (NewMetrics). Default:
	// a set registered nowhere.
	Metrics *Metrics
	// SegmentMaxBytes caps a segment: the frame that passes it marks the
	// segment full. Default DefaultSegmentMaxBytes.
	SegmentMaxBytes int64
	// RetentionMaxAge is the topic's retention_ms: a sweep deletes sealed
	// segments whose last write is older. 0 keeps everything.
	RetentionMaxAge time.Duration
	// RetentionMaxBytes is the topic's retention_bytes: a sweep deletes
	// the oldest sealed segments while the log's segments hold more bytes,
	// never the active one. 0 bounds nothing.
	RetentionMaxBytes int64
	// MaxSegmentAge is the roll age: the active segment rolls before the
	// first write that finds its oldest record older. 0 follows
	// RetentionMaxAge (and with no retention, never rolls on age).
	MaxSegmentAge time.Duration
	// CacheBudget bounds the decoded frames cached by every log sharing
	// it (a node's), besides each log's own bound of 8 frames and 2 MiB,
	// and lets each log keep one frame of any size that a read stopped
	// inside, so a frame larger than a reader's max bytes is read and
	// checked once, not once per part. Default: one budget of
	// DefaultCacheBudgetBytes shared by every log of the process opened
	// without one of its own, so a log embedded alone reads large frames
	// as a node's do, and a hundred thousand such logs pin no more than
	// it.
	CacheBudget *CacheBudget
	// Space, if set, keeps a floor of free space (space.go): a batch whose
	// commit would take the file system under it is refused with the
	// guard's error, nothing of it written, and the space a busy log
	// prepares past its frames is prepared only when it fits above it.
	// Default: none.
	Space SpaceGuard

	// flush holds the flusher's internal thresholds (docs/design.md,
	// "Flusher pipeline"); not a setting a config file can change, so only
	// this package's tests lower them.
	flush flushPolicy
	// noPrealloc turns preallocation off, for this package's tests that
	// count a commit's every disk call.
	noPrealloc bool
}

// flushPolicy: when buffered records are drained into a frame and when
// written frames are synced in the background.
type flushPolicy struct {
	drainBytes    int           // drain once this many record bytes are buffered
	drainRecords  int           // or this many records
	drainInterval time.Duration // or this long after the first buffered append
	syncInterval  time.Duration // sync written frames this long after the first unsynced write
	syncBytes     int64         // or once this many bytes are unsynced
	produceBytes  int           // a group commit stops taking produce messages past this many bytes
}

var defaultFlushPolicy = flushPolicy{
	drainBytes:    1 << 20,
	drainRecords:  1000,
	drainInterval: 100 * time.Millisecond,
	syncInterval:  time.Second,
	syncBytes:     8 << 20,
	produceBytes:  8 << 20,
}

func (o Options) withDefaults() (Options, error) {
	if o.FS == nil {
		o.FS = vfs.OS{}
	}
	if o.Codec == nil {
		o.Codec, _ = codec.ByID(codec.None)
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	if o.SegmentMaxBytes <= 0 {
		o.SegmentMaxBytes = DefaultSegmentMaxBytes
	}
	if o.flush == (flushPolicy{}) {
		o.flush = defaultFlushPolicy
	}
	if o.CacheBudget == nil {
		o.CacheBudget = processCacheBudget
	}
	return o, nil
}

// rollAge is the age of a segment's oldest record past which the next
// write rolls it; 0 never.
func rollAge(maxSegmentAge, retention time.Duration) time.Duration {
	if maxSegmentAge > 0 {
		return maxSegmentAge
	}
	return retention
}
