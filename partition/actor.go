package partition

import (
	"time"

	"github.com/narad-io/storage/vfs"
)

// message is what the actor takes from its mailbox. Every message carries
// a one-buffered reply channel, so the actor never blocks answering.
type message interface {
	replyChan() chan any
}

type request struct{ reply chan any }

func newRequest() request             { return request{reply: make(chan any, 1)} }
func (r request) replyChan() chan any { return r.reply }

type appendReply struct {
	base int64
	err  error
}

type appendMsg struct {
	request
	batch
}

type produceMsg struct {
	request
	batch
}

type commitMsg struct{ request }

type closeMsg struct{ request }

type setRetentionMsg struct {
	request
	maxAge   time.Duration
	maxBytes int64
}

type sweepMsg struct{ request }

type expiredMsg struct{ request }

// state is everything the actor owns. Only the actor goroutine touches it.
//
// Invariants, between messages:
//   - active.base <= hwm <= written <= nextOffset; hwmPos <= syncedPos <=
//     writePos == active.size. The high watermark is always inside the
//     active segment: a segment is sealed only when fully committed.
//   - Offsets [hwm, written) are frames written above the boundary, never
//     visible; [written, nextOffset) are in unwritten (if set) then buffer.
//   - At most one frame of the active segment is unsynced: a frame is
//     written only after everything before it was synced (partition/doc.go,
//     R2). So writePos > syncedPos means exactly the last frame is
//     unsynced.
//   - poison, once set, stays set until the log is reopened.
//   - bufferFrame, when set, is the frame of the one batch whose
//     envelopes buffer holds, all of them and nothing else (batch);
//     bufferPools are the pooled buffers of the batches buffer holds, and
//     nothing else holds them.
//   - spaceHeld is the sum of what Options.Space admitted since the last
//     release; it is released (and zero) once nothing is buffered or
//     unwritten, and at close.
//   - The active file holds nothing past max(writePos, allocEnd); bytes in
//     [writePos, allocEnd) are zeros written ahead (or what a failed
//     write left there, when tailDirty).
type state struct {
	log *Log

	sealed []*segment // oldest first; replaced, never changed in place
	active *segment
	file   vfs.File // the active segment, open read-write

	nextOffset  int64 // offset the next appended record gets
	written     int64 // offset after the last frame written to the file
	hwm         int64 // high watermark
	writePos    int64 // bytes of written frames in the active segment
	syncedPos   int64 // bytes of the active segment known durable
	hwmPos      int64 // byte position of the high watermark
	allocEnd    int64 // the active file's end when zeros were written ahead of writePos (prealloc.go); else <= writePos
	reservedEnd int64 // blocks of the active file are reserved up to here (prealloc.go); else <= writePos

	lastFrameAt    time.Time // the last frame write, in this segment or the one before
	lastFrameBytes int64     // its size (never reset: readBack compares it to the bytes above the high watermark)
	preallocOff    bool      // preparing space failed in this segment (or a commit did): none more
	idleTrimFailed bool      // giving it back when idle failed: left to the roll or close

	buffer        [][]byte // envelopes appended, not yet drained
	bufferBytes   int
	bufferFrame   []byte        // the frame layout buffer's envelopes are in, when they are one batch's (else nil)
	bufferPools   []*[]byte     // the pooled buffers of the batches whose envelopes buffer holds
	bufferPinned  int           // the memory buffer's envelopes lie in (pendingFrame.pinned)
	bufferSince   time.Time     // first append into an empty buffer
	appended      int           // records in the buffer that came from Append
	unwritten     *pendingFrame // a drained frame whose write failed, retried next
	backoffUntil  time.Time     // a failed background step (drain, roll, write) is retried no sooner
	tailDirty     bool          // a failed write may have left bytes past writePos
	unsyncedSince time.Time     // write of the unsynced frame; zero if none
	appendLost    error         // Append-ed records another commit's failure discarded
	payload       []byte        // reused payload buffer of drains

	poison        error
	hwmReleased   bool // the hwm file was emptied since open (or needs no emptying)
	hwmFileExists bool
	hwmFileValue  int64 // what the hwm file holds, when not released
	commitFloor   int64 // newest commit time seen, in ms
	floorKnown    bool  // commitFloor holds the last record's time (floor.go)

	retention      time.Duration
	retentionBytes int64
	maxSegmentAge  time.Duration

	spaceHeld Allocation // what Options.Space took for writes not yet done (space.go)

	timer   *time.Timer
	timerOn bool
	closed  bool
}

func newState(l *Log, rec *recovered) *state {
	return &state{
		log:            l,
		sealed:         rec.sealed,
		active:         rec.active,
		file:           rec.file,
		nextOffset:     rec.tail,
		written:        rec.tail,
		hwm:            rec.hwm,
		writePos:       rec.active.size,
		syncedPos:      rec.active.size,
		hwmPos:         rec.active.size,
		hwmReleased:    !rec.hwmFile.present,
		hwmFileExists:  rec.hwmFile.exists,
		hwmFileValue:   rec.hwmFile.value,
		commitFloor:    rec.lastTime,
		floorKnown:     rec.lastTimeKnown || (len(rec.sealed) == 0 && rec.tail == rec.active.base),
		retention:      l.opts.RetentionMaxAge,
		retentionBytes: l.opts.RetentionMaxBytes,
		maxSegmentAge:  l.opts.MaxSegmentAge,
	}
}

// run is the actor's loop: one message (or timer pass) at a time, each
// handled to the end before the next.
func (s *state) run() {
	defer close(s.log.stopped)
	for !s.closed {
		var timerC <-chan time.Time
		if s.timerOn {
			timerC = s.timer.C
		}
		select {
		case m := <-s.log.mailbox:
			s.handle(m)
		case <-timerC:
			s.timerOn = false
			s.flushPass()
		}
		s.settleSpace()
		if !s.closed {
			s.rearm()
		}
	}
}

func (s *state) handle(m message) {
	switch m := m.(type) {
	case *appendMsg:
		m.reply <- s.handleAppend(m)
	case *produceMsg:
		s.handleProduce(m)
	case *commitMsg:
		m.reply <- s.handleCommitDurable()
	case *setRetentionMsg:
		changed := s.retention != m.maxAge || s.retentionBytes != m.maxBytes
		s.retention, s.retentionBytes = m.maxAge, m.maxBytes
		m.reply <- changed
	case *sweepMsg:
		m.reply <- s.sweep()
	case *expiredMsg:
		m.reply <- s.expired()
	case *closeMsg:
		m.reply <- s.close()
	case *timeIndexMsg:
		s.handleTimeIndex(m)
	}
}
