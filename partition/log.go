package partition

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// mailboxSize bounds a log's mailbox; senders wait (or give up with their
// context) when it is full.
const mailboxSize = 256

// maxBatchBytes bounds one Append or Produce call's envelopes, so one call
// always fits in a frame with room to spare.
const maxBatchBytes = 64 << 20

// Record is what a producer hands the log: an optional key and a value.
type Record struct {
	Key   []byte
	Value []byte
}

// Log is one partition's log: a directory of segments owned by one
// goroutine, the actor. Every state change is a message on its mailbox;
// readers load the published view and read without waiting for the actor.
// All methods are safe for concurrent use.
type Log struct {
	dir     string
	opts    Options
	logger  *zap.Logger
	metrics *Metrics

	mailbox chan message
	stopped chan struct{} // closed when the actor has exited

	view           atomic.Pointer[view]
	notify         notifier
	cache          frameCache
	hot            hotSet
	readSinceWrite atomic.Bool // a read happened since the last frame write
	damage         damageLog   // damaged places reads met, each logged once

	// sweeping is a one-slot semaphore held from a sweep's detach to the
	// end of its unlinks, and by Close, which so waits for them. A channel
	// rather than a mutex: a test's synctest bubble sees a Close parked on
	// it as durably blocked.
	sweeping       chan struct{}
	pendingUnlinks []detached // retention unlinks that failed, retried by the next sweep; guarded by sweeping

	closeOnce sync.Once
	closeErr  error
}

// Open recovers the log in dir (creating an empty one if dir holds no
// segment) and starts its actor.
func Open(dir string, opts Options) (*Log, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	started := time.Now()
	rec, err := recoverLog(dir, opts)
	if err != nil {
		return nil, err
	}
	l := &Log{
		dir:      dir,
		opts:     opts,
		logger:   opts.Logger.With(zap.String("partition_dir", dir)),
		metrics:  opts.Metrics,
		mailbox:  make(chan message, mailboxSize),
		stopped:  make(chan struct{}),
		sweeping: make(chan struct{}, 1),
	}
	l.cache.budget = opts.CacheBudget
	st := newState(l, rec)
	st.publish()
	l.metrics.openLogs.Inc()
	l.metrics.recoverySeconds.Observe(time.Since(started).Seconds())
	l.metrics.tornTails.Add(float64(rec.tornTails))
	l.metrics.gapsRecorded.Add(float64(len(rec.active.gaps)))
	go pprof.Do(context.Background(), pprof.Labels("partition", dir), func(context.Context) { st.run() })
	return l, nil
}

// Closed reports whether the log is closed or closing: its closed view is
// published (reads answer ErrLogClosed) or its actor has stopped. A
// closed log answers ErrLogClosed to everything but Close.
func (l *Log) Closed() bool {
	if v := l.view.Load(); v != nil && v.closed {
		return true
	}
	select {
	case <-l.stopped:
		return true
	default:
		return false
	}
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// HighWatermark is the exclusive bound of what readers may see.
func (l *Log) HighWatermark() int64 { return l.view.Load().hwm }

// StartOffset is the lowest offset still held (retention moves it).
func (l *Log) StartOffset() int64 { return l.view.Load().start }

// Append buffers records and returns the offset of the first. Nothing is
// visible or durable until a CommitDurable returns nil; a failed commit of
// another batch may discard them, and the next CommitDurable then says so.
// An Append and the CommitDurable that follows are one caller's pair:
// callers serialize their pairs (the runtime's exclusive produce gate
// does), or one caller's failure report may reach another.
func (l *Log) Append(ctx context.Context, records []Record) (base int64, err error) {
	b, err := buildEnvelopes(records)
	if err != nil {
		return 0, err
	}
	r, err := l.call(ctx, &appendMsg{request: newRequest(), batch: b})
	if err != nil {
		return 0, err
	}
	rep := r.(appendReply)
	return rep.base, rep.err
}

// CommitDurable makes everything appended so far durable and visible:
// drain, write one frame, fdatasync, read back and CRC-check, then advance
// the high watermark. On error nothing of the batch is left behind and the
// caller may append the same records again; after ErrLogPoisoned only a
// reopen helps. ctx bounds the wait for mailbox room only: once the actor
// has the commit, the call waits for its outcome, since returning early
// would leave the caller unsure whether it happened.
func (l *Log) CommitDurable(ctx context.Context) error {
	r, err := l.call(ctx, &commitMsg{newRequest()})
	if err != nil {
		return err
	}
	err, _ = r.(error)
	return err
}

// Produce appends records and commits them as one message. Produce calls
// waiting in the mailbox together are committed as one frame, one write and
// one fdatasync (group commit), each caller getting its own consecutive
// offsets; if that commit fails, every caller of the group gets the error
// and nothing of any of them stays behind.
func (l *Log) Produce(ctx context.Context, records []Record) (base int64, err error) {
	b, err := buildEnvelopes(records)
	if err != nil {
		return 0, err
	}
	r, err := l.call(ctx, &produceMsg{request: newRequest(), batch: b})
	if err != nil {
		return 0, err
	}
	rep := r.(appendReply)
	return rep.base, rep.err
}

// SetRetention applies a topic's new retention bounds in place (as
// Options.RetentionMaxAge and RetentionMaxBytes); the active segment's
// roll age follows maxAge unless MaxSegmentAge was set. changed says the
// bounds differ from the log's before, so a sweep may now find work.
func (l *Log) SetRetention(ctx context.Context, maxAge time.Duration, maxBytes int64) (changed bool, err error) {
	r, err := l.call(ctx, &setRetentionMsg{request: newRequest(), maxAge: maxAge, maxBytes: maxBytes})
	if err != nil {
		return false, err
	}
	return r.(bool), nil
}

// Wake announces that records may have become deliverable for a reason
// other than a commit (a lease expiry, a nack, a freed cap slot).
func (l *Log) Wake() { l.notify.broadcast() }

// NotifyC returns the broadcast channel, closed at the next high-watermark
// advance, Wake or close. A waiter fetches it before its last check for
// data, and fetches it again after every wake-up.
func (l *Log) NotifyC() <-chan struct{} { return l.notify.C() }

// SetWakeNotifier installs a function called at every announcement (nil
// removes it). It must not block.
func (l *Log) SetWakeNotifier(f func()) { l.notify.setWakeNotifier(f) }

// Close stops the actor after a final settle: anything written above the
// high watermark is cut, and the exact high watermark is written to the hwm
// file. Buffered records nobody committed are dropped (they were never
// promised). Reads afterwards answer ErrLogClosed. Close returns the same
// error every time it is called. A sweep's unlinks finish before the actor
// stops (runtime/doc.go, "Retention detach and unlink").
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		l.sweeping <- struct{}{}
		defer func() { <-l.sweeping }()
		m := &closeMsg{newRequest()}
		select {
		case l.mailbox <- m:
			l.closeErr, _ = (<-m.reply).(error)
		case <-l.stopped:
		}
		<-l.stopped
	})
	return l.closeErr
}

// call sends a message and waits for its reply.
func (l *Log) call(ctx context.Context, m message) (any, error) {
	select {
	case l.mailbox <- m:
	case <-l.stopped:
		return nil, ErrLogClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-m.replyChan():
		return r, nil
	case <-l.stopped:
		// The actor may have answered just before it stopped.
		select {
		case r := <-m.replyChan():
			return r, nil
		default:
			return nil, ErrLogClosed
		}
	}
}

// batch is one Append's or Produce's records as the actor takes them:
// their envelopes, laid out in frame as an uncompressed frame of this
// batch alone holds them (room for the header, then each envelope after
// its length), so that frame is written from these bytes without a copy
// (state.drain). A batch of at least pooledBatchBytes takes frame from the
// buffer pool, so a large commit neither allocates nor zeroes it; only the
// actor's write of the frame gives it back (writeFrame), and every other
// end of a batch leaves it to the garbage collector.
type batch struct {
	envs   [][]byte // the envelopes, in frame
	frame  []byte
	pooled *[]byte // frame's pooled buffer (nil: not pooled)
}

// pooledBatchBytes is the smallest batch whose frame comes from the pool:
// its smallest class, so a pooled frame fills at least half its buffer.
const pooledBatchBytes = 1 << minPooledClass

// buildEnvelopes stamps each record's commit time and lays it out as the
// keyed envelope, all in one buffer laid out as a frame.
func buildEnvelopes(records []Record) (batch, error) {
	if len(records) == 0 {
		return batch{}, errors.New("partition: no records")
	}
	size := 0
	for _, r := range records {
		if len(r.Key) > wire.MaxKeyBytes {
			return batch{}, fmt.Errorf("%w: key of %d bytes, at most %d", ErrTooLarge, len(r.Key), wire.MaxKeyBytes)
		}
		size += wire.EnvelopeSize(len(r.Key), len(r.Value))
		if size > maxBatchBytes {
			return batch{}, fmt.Errorf("%w: batch over %d bytes", ErrTooLarge, maxBatchBytes)
		}
	}
	now := time.Now().UnixMilli()
	b := batch{envs: make([][]byte, len(records))}
	if frameSize := wire.FrameHeaderSize + len(records)*wire.RecordLenSize + size; frameSize >= pooledBatchBytes {
		b.frame, b.pooled = getBuf(frameSize) // every byte is written below, or by the frame header
		b.frame = b.frame[:wire.FrameHeaderSize]
	} else {
		b.frame = make([]byte, wire.FrameHeaderSize, frameSize)
	}
	for i, r := range records {
		var err error
		if b.frame, b.envs[i], err = wire.AppendEnvelopeRecord(b.frame, r.Key, now, r.Value); err != nil {
			return batch{}, fmt.Errorf("%w: %w", ErrTooLarge, err)
		}
	}
	return b, nil
}
