package scrub

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// Pass is one walk over topics/: every partition this node owns, from
// where its progress file says the pass under way stands. beat is called
// at every paced step and partition (the loop's PassContext.Beat); item,
// when not nil, runs each partition's work (PassContext.Item, which
// contains a panic to that partition). It returns when ctx ends; a pass
// that ran to the end forgets the partitions it did not meet, and every
// pass forgets, at its start, the topics no longer in topics/.
func (s *Scrubber) Pass(ctx context.Context, beat func(), item func(key string, fn func())) {
	if beat == nil {
		beat = func() {}
	}
	if item == nil {
		item = func(_ string, fn func()) { fn() }
	}
	topics, err := s.cfg.FS.ReadDir(s.cfg.TopicsDir)
	if err != nil {
		s.logger.Warn("scrub: list topics", zap.Error(err))
		return
	}
	listed := map[string]bool{}
	for _, te := range topics {
		listed[te.Name] = te.IsDir
	}
	// A topic deleted since the last pass loses its series now, not at
	// this pass's end.
	s.metrics.passStart(func(topic string) bool { return listed[topic] })
	unknown, firstErr := 0, error(nil) // partitions whose assignment could not be read
	defer func() {
		if unknown > 0 {
			s.logger.Warn("scrub: assignment unknown; partitions left this pass, their series kept",
				zap.Int("partitions", unknown), zap.Error(firstErr))
		}
	}()
	for _, te := range topics {
		// ValidateTopicName refuses quarantined <name>.stale-<id>
		// directories and anything else no topic can be named.
		if !te.IsDir || wire.ValidateTopicName(te.Name) != nil {
			continue
		}
		parts, err := s.cfg.FS.ReadDir(filepath.Join(s.cfg.TopicsDir, te.Name))
		if err != nil {
			s.logger.Debug("scrub: list partitions", zap.String("topic", te.Name), zap.Error(err))
			continue
		}
		for _, pe := range parts {
			p, err := wire.ParsePartitionDirName(pe.Name)
			if err != nil || !pe.IsDir {
				continue // the incarnation marker, a move's staging directory
			}
			if ctx.Err() != nil {
				return
			}
			beat()
			key := partitionKey{te.Name, p}
			assigned, err := s.cfg.Node.Assigned(ctx, key.topic, key.partition)
			if err != nil {
				// A metastore outage: left this pass, its series kept
				// (logged once, at the pass's end).
				if unknown++; firstErr == nil {
					firstErr = err
				}
				s.metrics.keep(key)
				continue
			}
			if !assigned {
				continue // another node's copy (a move's source, say)
			}
			item(fmt.Sprintf("%s/%d", key.topic, key.partition), func() {
				s.partition(ctx, key, filepath.Join(s.cfg.TopicsDir, te.Name, pe.Name), beat)
			})
		}
		s.metrics.topicDone(te.Name)
	}
	if ctx.Err() == nil {
		s.metrics.passDone()
	}
}

// sealedSegment is one sealed segment of a partition as its directory
// lists it.
type sealedSegment struct {
	base, end int64 // end: the next segment's base
	size      int64
}

// partition scrubs the sealed segments of one partition from where its
// progress stands, saving the progress after each segment and, at the
// end, the pass's completion.
func (s *Scrubber) partition(ctx context.Context, key partitionKey, dir string, beat func()) {
	// The marker first: a listing made after it is of its incarnation or
	// of a later one, which every write under it refuses. Read after the
	// listing, it could be a later incarnation's while the listing is the
	// earlier one's, and progress made of the old segments would land in
	// the new directory.
	marker := s.incarnation(dir)
	prog := s.loadProgress(dir)
	if s.recent(prog) {
		// A whole pass ended less than an Interval ago (before a
		// restart, say): not due yet, but its series stay.
		s.metrics.set(key, partitionStat{progress: 1, completed: time.UnixMilli(prog.CompletedUnixMs)})
		return
	}
	sealed, err := s.listSealed(dir)
	if err != nil {
		s.logger.Debug("scrub: list segments", zap.String("dir", dir), zap.Error(err))
		return // a partition removed since the listing
	}
	if len(sealed) == 0 {
		// Nothing sealed, nothing to check or to write: a node of
		// many small partitions writes no file for them.
		s.metrics.set(key, partitionStat{progress: 1, completed: time.Now()})
		return
	}
	var total, done int64
	for _, seg := range sealed {
		total += seg.size
		if seg.end <= prog.Next {
			done += seg.size
		}
	}
	stat := partitionStat{completed: time.UnixMilli(prog.CompletedUnixMs)}
	if prog.CompletedUnixMs == 0 {
		stat.completed = time.Time{}
	}
	share := func() float64 {
		if total == 0 {
			return 1
		}
		return float64(done) / float64(total)
	}
	stat.progress = share()
	s.metrics.set(key, stat)
	failed := false         // a segment could not be read: the pass under way cannot complete
	removed := false        // a segment was gone when walked
	var last *sealedSegment // the newest segment this pass walked, at the size walked
	for _, seg := range sealed {
		if seg.end <= prog.Next {
			continue // checked before a restart
		}
		walked, err := s.segment(ctx, key, dir, marker, seg, beat)
		switch {
		case ctx.Err() != nil:
			return // the progress saved so far stands
		case errors.Is(err, fs.ErrNotExist):
			// Retention removed it since the listing, or under the
			// walk, or the topic was deleted: nothing to check, and
			// nothing saved on it. A write checked against a segment
			// gone proves nothing about whose directory it lands in
			// (a topic made again under the walk, without a marker,
			// would take the pass's progress); the next segment
			// walked saves past it.
			removed = true
			done += seg.size
			stat.progress = share()
			s.metrics.set(key, stat)
			continue
		case err != nil:
			s.readFailed(key, seg, err)
			failed = true
			continue
		}
		done += seg.size
		stat.progress = share()
		s.metrics.set(key, stat)
		if failed {
			continue // the progress stays at the unread segment
		}
		prog.Next = seg.end
		checked := seg
		checked.size = walked
		last = &checked
		if err := s.saveProgress(key, dir, marker, prog, &checked); err != nil {
			s.progressFailed(key, err)
			return
		}
	}
	if failed {
		// Not a whole pass: the progress names the first segment it
		// could not read, where the next pass resumes, and the last
		// completion stands.
		return
	}
	if last == nil {
		if removed {
			return // every segment left was gone: no write here proves the directory the pass's
		}
		newest := sealed[len(sealed)-1] // every one checked before a restart: as listed
		last = &newest
	}
	now := time.Now()
	prog = wire.ScrubProgress{CompletedUnixMs: now.UnixMilli()}
	if err := s.saveProgress(key, dir, marker, prog, last); err != nil {
		s.progressFailed(key, err)
		return
	}
	stat.completed, stat.progress = now, 1
	s.metrics.set(key, stat)
}

// recent reports whether prog is of a partition whose last whole pass
// ended less than an Interval ago, no pass under way since: a start (the
// loop's first pass runs at once) leaves it until it is due, so a node
// restarted often neither scrubs the same segments again and again nor
// waits an Interval at every start. A completion in the future (a clock
// set back) is not recent.
func (s *Scrubber) recent(prog wire.ScrubProgress) bool {
	if prog.Next != 0 || prog.CompletedUnixMs == 0 {
		return false
	}
	age := time.Now().UnixMilli() - prog.CompletedUnixMs
	// A tenth of the Interval spare: the wall clock the completion is
	// stamped with may run slower than the loop's, and a partition
	// completed at a pass's end must not look recent an Interval later.
	return age >= 0 && age < (s.cfg.Interval-s.cfg.Interval/10).Milliseconds()
}

// readFailed counts and logs a sealed segment the pass could not read
// (an I/O error, not damage), with where the read failed.
func (s *Scrubber) readFailed(key partitionKey, seg sealedSegment, err error) {
	s.metrics.failures.Inc()
	pos := int64(-1)
	var rf *readFailure
	if errors.As(err, &rf) {
		pos = rf.pos
	}
	s.logger.Warn("scrub: read a sealed segment; the partition's pass cannot complete", zap.String("topic", key.topic),
		zap.Int("partition", key.partition), zap.String("segment", segmentName(seg.base)), zap.Int64("byte", pos), zap.Error(err))
}

func (s *Scrubber) progressFailed(key partitionKey, err error) {
	if errors.Is(err, ErrPartitionGone) {
		return // deleted, moved or quarantined under the pass
	}
	s.logger.Warn("scrub: save progress", zap.String("topic", key.topic), zap.Int("partition", key.partition), zap.Error(err))
}

// listSealed lists a partition's sealed segments, oldest first: every
// segment but the newest, the active one (a closed log's newest is the
// active one again at its next open). A segment listed here has a
// successor, so it was sealed before the successor existed.
func (s *Scrubber) listSealed(dir string) ([]sealedSegment, error) {
	entries, err := s.cfg.FS.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []int64 // ReadDir sorts by name: 20-digit names sort by offset
	var sizes []int64
	for _, e := range entries {
		base, err := wire.ParseSegmentFileName(e.Name)
		if err != nil || e.IsDir {
			continue
		}
		fi, err := s.cfg.FS.Stat(filepath.Join(dir, e.Name))
		if err != nil {
			continue // removed by retention since the listing
		}
		bases, sizes = append(bases, base), append(sizes, fi.Size)
	}
	var out []sealedSegment
	for i := 0; i+1 < len(bases); i++ {
		out = append(out, sealedSegment{base: bases[i], end: bases[i+1], size: sizes[i]})
	}
	return out, nil
}

// segment checks one sealed segment, paced, with partition.WalkSegment,
// and reports what it finds; it returns the size it walked (-1 when it
// walked nothing). A segment of a closed partition, or one not
// among an open log's hot segments, is read from the media (its cached
// pages dropped first: what the cache holds is not what the disk does)
// and dropped from the page cache after, so the scrub leaves no pages
// behind; a hot segment of an open log is read through the cache, whose
// pages its readers are using, and left there.
func (s *Scrubber) segment(ctx context.Context, key partitionKey, dir, marker string, seg sealedSegment, beat func()) (walked int64, err error) {
	f, err := s.cfg.FS.OpenFile(filepath.Join(dir, segmentName(seg.base)), os.O_RDONLY)
	if err != nil {
		return -1, err
	}
	defer f.Close()
	if l, open := s.cfg.Node.LogIfOpen(key.topic, key.partition); !open || !l.SegmentHot(seg.base) {
		if err := f.DropCache(); err != nil {
			// Read all the same: a hint refused is not a segment unread.
			s.logger.Debug("scrub: drop cached pages before the read", zap.String("segment", f.Name()), zap.Error(err))
		}
	}
	fi, err := f.Stat()
	if err != nil {
		return -1, err
	}
	seg.size = fi.Size // what is walked, which the findings are checked against
	pf := &pacedFile{File: f, fs: s.cfg.FS, ctx: ctx, pacer: s.pacer, beat: beat}
	var found []partition.SegmentDamage
	res, err := partition.WalkSegment(pf, fi.Size, seg.base, nil, func(d partition.SegmentDamage) { found = append(found, d) })
	s.metrics.bytes.Add(float64(pf.read))
	if err != nil {
		return -1, err
	}
	if res.TornAt < 0 && res.Tail < seg.end {
		// Frames that check out, then the end (or zeros): a sealed
		// segment ends at its successor's base, so the offsets between
		// are lost, as verify reports them.
		found = append(found, partition.SegmentDamage{Pos: res.TailPos, Expect: res.Tail, ResumeAt: -1, ResumeBase: -1,
			Reason: fmt.Errorf("sealed segment ends at offset %d, its successor starts at %d", res.Tail, seg.end)})
	}
	if l, open := s.cfg.Node.LogIfOpen(key.topic, key.partition); !open || !l.SegmentHot(seg.base) {
		if err := f.DropCache(); err != nil {
			s.logger.Debug("scrub: drop cached pages", zap.String("segment", f.Name()), zap.Error(err))
		}
	}
	if len(found) > 0 {
		s.reportFound(key, dir, marker, seg, found)
	}
	return seg.size, nil
}

func segmentName(base int64) string { return fmt.Sprintf("%020d.log", base) }
