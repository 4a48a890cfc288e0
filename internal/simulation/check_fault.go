package simulation

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
)

// What the model expects of an operation that met an injected fault: the
// error kind the docs name for it (docs/http-api.md gives each its status
// and code), and, for a failed produce, nothing kept.

// kind is one error kind an answer may be.
type kind struct {
	name string
	is   func(error) bool
}

// commitFailed is a produce's failed commit: 503 commit_failed, or 507
// no_space when the cause was ENOSPC; neither poisoned nor busy.
func commitFailed(cause error) kind {
	noSpace := errors.Is(cause, syscall.ENOSPC)
	name := "commit_failed"
	if noSpace {
		name = "no_space"
	}
	return kind{name, func(err error) bool {
		return errors.Is(err, partition.ErrCommitFailed) && errors.Is(err, partition.ErrNoSpace) == noSpace &&
			!errors.Is(err, partition.ErrLogPoisoned) && !errors.Is(err, runtime.ErrBusy)
	}}
}

var (
	// logPoisoned: 503 log_poisoned, an fdatasync of the log failed.
	logPoisoned = kind{"log_poisoned", func(err error) bool { return errors.Is(err, partition.ErrLogPoisoned) }}
	// busy: 503 busy, no open-log slot or file descriptor free.
	busy = kind{"busy", func(err error) bool { return errors.Is(err, runtime.ErrBusy) }}
)

// internal is the answer to an I/O error no named kind covers (500
// internal, "an I/O error, never bad input"): it wraps the injected cause
// and is none of the named kinds.
func internal(cause error) kind {
	return kind{fmt.Sprintf("internal (%v)", cause), func(err error) bool {
		for _, named := range []error{partition.ErrCommitFailed, partition.ErrNoSpace, partition.ErrLogPoisoned,
			runtime.ErrBusy, runtime.ErrMetastoreBroken, runtime.ErrTopicNotFound, runtime.ErrBadRetention} {
			if errors.Is(err, named) {
				return false
			}
		}
		return errors.Is(err, cause)
	}}
}

// causeOf is the error a call failing under f returns.
func causeOf(errno error, short int) error {
	if errno == nil && short > 0 {
		return io.ErrShortWrite
	}
	return errno
}

// answer checks one operation's answer under a fault: when the fault
// fired during it, the kind k (or, unless mustFail, success: the fault
// met a call the answer does not depend on); when it did not, success.
func (r *runner) answer(what string, fired, mustFail bool, err error, k kind) {
	switch {
	case fired && err == nil && mustFail:
		r.failf("%s met the injected fault and answered success; want %s", what, k.name)
	case fired && err != nil && !k.is(err):
		r.failf("%s met the injected fault: %v; want %s", what, err, k.name)
	case !fired && err != nil:
		r.failf("%s: unexpected error: %v (the injected fault did not fire)", what, err)
	}
}

// refused reports whether a produce's error is the refusal a poisoned log
// owes: the log a failed fdatasync poisoned is still the partition's open
// log. Once another is open (a restart, a crash, an eviction reopened
// it), the poison is gone and the produce must have succeeded.
func (r *runner) refused(t *topicModel, pi int, err error) bool {
	p := t.parts[pi]
	if p.flt.poisoned == nil {
		return false
	}
	if l, open := r.n.LogIfOpen(t.name, pi); open && l == p.flt.poisoned {
		if !logPoisoned.is(err) {
			r.failf("produce %s/%d: %v from the log a failed fdatasync poisoned; want log_poisoned", t.name, pi, err)
		}
		return true
	}
	p.flt.poisoned = nil
	return false
}

// anyPoisoned reports a poisoned log still open on any partition: the
// operations that need their produces to land (long polls, waiting
// consumes, concurrent producers, the floor) wait for it to be reopened.
func (r *runner) anyPoisoned() bool { return len(r.poisonedLogs()) > 0 }

// poisonedLogs lists the partitions whose poisoned log is open: until it
// is reopened (idle eviction closes it, the cold walk or a produce opens
// it again) retention does not rotate its active segment, since a roll
// is a write (docs/design.md, "Retention"); sealed ones it deletes.
func (r *runner) poisonedLogs() map[*partModel]bool {
	out := map[*partModel]bool{}
	for _, t := range r.topics {
		for pi, p := range t.parts {
			if r.poisonedNow(t, pi) {
				out[p] = true
			}
		}
	}
	return out
}

// closeNode closes the node and returns what of its error the model does
// not expect: a poisoned log's close reports its poison (one per
// poisoned log still open), and allow passes what a fault injected into
// the close may cost (nil: nothing).
func (r *runner) closeNode(allow func(error) bool) error {
	poisoned := len(r.poisonedLogs())
	err := r.n.Close()
	if err == nil {
		return nil
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var kept []error
	for _, e := range errs {
		switch {
		case errors.Is(e, partition.ErrLogPoisoned) && poisoned > 0:
			poisoned--
		case allow != nil && allow(e):
		default:
			kept = append(kept, e)
		}
	}
	return errors.Join(kept...)
}

// aheadOf is the size of a partition's acked-ahead set in the model.
func aheadOf(p *partModel) int {
	low := int64(0)
	for p.isAcked(low) {
		low++
	}
	return len(p.acked) - int(low)
}

// checkLostAcks checks one partition's consumer progress after a clean
// close that met a fault on its consumer files (armed at at, the
// acked-ahead set then of ahead offsets), and makes the model forget the
// acks it lost, which it returns. As after a crash (afterCrash): nothing
// is held acked whose ack did not return; an ack may be lost only if it
// returned within ackWindow before at or after it (the close could not
// write out what the last write-out had not), or if the set held more
// than keptAhead offsets (a slot keeps only its lowest, and a close that
// fails writes no consumer.acked). Acks the node still holds are kept.
func (r *runner) checkLostAcks(t *topicModel, pi int, at time.Time, ahead int) []int64 {
	p := t.parts[pi]
	p.start = r.describe(t)[pi].StartOffset
	st, nodeAcked := r.consumerState(t, pi)
	var lost []int64
	for o := range p.acked {
		if o < p.start && !nodeAcked(o) {
			delete(p.acked, o) // deleted by retention: no promise
		}
	}
	for o := p.start; o < p.committed; o++ {
		got, when := nodeAcked(o), p.acked[o]
		switch {
		case got && !p.isAcked(o):
			r.failf("after a failed close %s/%d: offset %d held acked, its ack never returned (frontier %d)", t.name, pi, o, st.Frontier)
		case !got && p.isAcked(o) && when.Before(at.Add(-ackWindow)) && ahead <= keptAhead && !p.mayLoseOverSlot(o, at):
			r.failf("after a failed close %s/%d: the ack of offset %d, returned %v before the fault, was lost (frontier %d, %d acked ahead)",
				t.name, pi, o, at.Sub(when), st.Frontier, len(st.AckedAhead))
		case !got && p.isAcked(o):
			delete(p.acked, o)
			lost = append(lost, o)
		}
	}
	r.checkFrontier(t, pi, st.Frontier, "after a failed close")
	return lost
}
