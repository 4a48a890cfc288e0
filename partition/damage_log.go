package partition

import (
	"path/filepath"
	"sync"

	"go.uber.org/zap"
)

// damageLog says, once per damaged place, that a read met damage: an
// operator learns of it from the log, not only from errors_total. It is
// bounded: past maxDamageLogged places it forgets the ones it logged and
// may log them again, so a partition full of damage logs at most that
// many lines per pass over it.
//
// Invariant: logged holds at most maxDamageLogged places; guarded by mu,
// taken by readers (never with any other lock held).
type damageLog struct {
	mu     sync.Mutex
	logged map[damagePlace]struct{}
}

// damagePlace is a damaged place: a segment and the byte where the read
// found the damage.
type damagePlace struct {
	segment int64
	pos     int64
}

const maxDamageLogged = 64

// damaged counts a read's damage in errors_total, forgets any proof of
// the frame at pos, logs it the first time it is met (segment, byte,
// offsets) and returns u.
func (l *Log) damaged(seg *segment, pos int64, u *UnreadableError) *UnreadableError {
	l.cache.dropProofAt(seg, pos) // what it proved no longer holds
	l.metrics.countError(kindReadCorrupt)
	if l.damage.first(damagePlace{seg.base, pos}) {
		l.logger.Warn("read met a damaged frame; its records are skipped, never served",
			zap.String("segment", filepath.Base(seg.path)), zap.Int64("byte", pos),
			zap.Int64("offset", u.Offset), zap.Int64("next_offset", u.Next), zap.Error(u.Cause))
	}
	return u
}

// first reports whether p is met for the first time (since the last
// reset).
func (d *damageLog) first(p damagePlace) bool {
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
