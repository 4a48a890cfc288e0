package scrub

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/narad-io/storage/partition"
	"go.uber.org/zap"
)

// maxDamageLogged bounds the places a scrubber remembers having logged:
// past it, it forgets them and may log them again, so a node full of
// damage logs at most that many lines a pass.
const maxDamageLogged = 256

// damagePlace is a damaged place: a partition, a segment and the byte
// where the damage starts.
type damagePlace struct {
	key     partitionKey
	segment int64
	pos     int64
}

// damageSeen remembers the damaged places a scrubber logged.
//
// Invariant: logged holds at most maxDamageLogged places; mu guards it.
type damageSeen struct {
	mu     sync.Mutex
	logged map[damagePlace]struct{}
}

func (d *damageSeen) first(p damagePlace) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.logged[p]; ok {
		return false
	}
	if d.logged == nil || len(d.logged) >= maxDamageLogged {
		d.logged = map[damagePlace]struct{}{}
	}
	d.logged[p] = struct{}{}
	return true
}

// errNotOurs: the segment walked is no longer the partition's.
var errNotOurs = errors.New("scrub: the segment walked is no longer the partition's")

// reportFound reports what the walk of seg found, under the topic's guard
// (Node.InPartition) and only while the segment is still the partition's
// and sealed: the topic's incarnation marker reads as it did when the
// pass began the partition, the segment's name holds a file of the size
// walked, and an open log holds it among its sealed segments. A
// segment whose topic was deleted (and perhaps made again) under the walk
// is no partition's any more: its findings are dropped, logged at debug,
// rather than blamed on the new incarnation's log.
func (s *Scrubber) reportFound(key partitionKey, dir, marker string, seg sealedSegment, found []partition.SegmentDamage) {
	err := s.cfg.Node.InPartition(key.topic, key.partition, func() error {
		if err := s.stillOurs(dir, marker, seg); err != nil {
			return err
		}
		l, open := s.cfg.Node.LogIfOpen(key.topic, key.partition)
		if open && !l.SegmentSealed(seg.base) {
			// The open log does not hold it sealed: a failed roll's
			// file, gone again, made the active segment look sealed.
			return fmt.Errorf("%w: the open log's active segment", errNotOurs)
		}
		for _, d := range found {
			s.report(key, seg, d, l, open)
		}
		return nil
	})
	if err != nil {
		s.logger.Debug("scrub: findings dropped", zap.String("topic", key.topic), zap.Int("partition", key.partition),
			zap.String("segment", segmentName(seg.base)), zap.Int("findings", len(found)), zap.Error(err))
	}
}

// stillOurs checks, under the topic's guard, that seg is still the
// partition's: the marker unchanged and a file of the size walked under
// its name.
func (s *Scrubber) stillOurs(dir, marker string, seg sealedSegment) error {
	if now := s.incarnation(dir); now != marker {
		return fmt.Errorf("%w: incarnation %q, the pass began under %q", errNotOurs, now, marker)
	}
	name := filepath.Join(dir, segmentName(seg.base))
	fi, err := s.cfg.FS.Stat(name)
	if err != nil {
		return err
	}
	if fi.Size != seg.size {
		return fmt.Errorf("%w: %s holds %d bytes, %d were walked", errNotOurs, name, fi.Size, seg.size)
	}
	return nil
}

// report records one damaged place of a sealed segment: counted in
// narad_scrub_damaged_frames_total and, when the partition's log l is open,
// handed to it (partition.Log.ScrubFound: its cache forgets the range,
// errors_total{kind="read_corrupt"} counts it, its damage log logs it
// once); when it is closed, logged here once, with the same fields. Either
// way a later read of the range goes to the disk and answers
// partition.UnreadableError: the damage is in the file, which is the
// record, so nothing else needs keeping. seg.size is the size walked.
func (s *Scrubber) report(key partitionKey, seg sealedSegment, d partition.SegmentDamage, l *partition.Log, open bool) {
	s.metrics.damaged.Inc()
	end := d.ResumeBase
	if d.TornTail() {
		end = seg.end
	}
	if open {
		l.ScrubFound(seg.base, d, end, damageEnd(d, seg))
		return
	}
	if s.found.first(damagePlace{key, seg.base, d.Pos}) {
		from := d.Expect
		if from < 0 {
			from = seg.base
		}
		s.logger.Warn("scrub found a damaged frame; its records are skipped, never served",
			zap.String("topic", key.topic), zap.Int("partition", key.partition),
			zap.String("segment", segmentName(seg.base)), zap.Int64("byte", d.Pos), zap.Int64("byte_end", damageEnd(d, seg)),
			zap.Int64("offset", from), zap.Int64("next_offset", end), zap.Error(d.Reason))
	}
}

// damageEnd is the byte where the damage ends: where valid frames resume,
// or the end of the segment as walked.
func damageEnd(d partition.SegmentDamage, seg sealedSegment) int64 {
	if d.TornTail() {
		return seg.size
	}
	return d.ResumeAt
}
