package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// maxPreCopyRounds bounds the listings a pull copies sealed segments from
// before it asks for the freeze.
const maxPreCopyRounds = 5

// pull moves one partition here, and reports whether it did. Before the
// freeze a failure leaves the move requested, to be pulled again after a
// pause; after it, the move is cancelled (the old owner serves again) and
// whatever was installed here is dropped.
func (m *mover) pull(ctx context.Context, mv Move) bool {
	p := m.p
	log := m.logger.With(zap.String("move", mv.ID), zap.String("topic", mv.Topic), zap.Int("partition", mv.Partition), zap.String("from", mv.From))
	src, ok := p.ms.Locate(mv.Topic, mv.Partition)
	if !ok || src.NodeID != mv.From || src.Addr == "" {
		return false // its old owner went meanwhile
	}
	start := time.Now()
	unlock := p.locks.lock(mv.Topic, mv.Partition)
	frozen, err := m.copyPartition(ctx, mv, src, log)
	if err == nil {
		err = p.ms.CompleteMove(ctx, frozen)
	}
	unlock()
	if err == nil {
		log.Info("partition moved here", zap.Duration("took", time.Since(start)))
		m.release(ctx, src, mv, log)
		return true
	}
	if ctx.Err() != nil {
		return false // stopping: the move is taken up again after a restart
	}
	log.Error("partition move failed", zap.Error(err))
	if frozen.State == MoveFrozen {
		if cerr := p.ms.CancelMove(ctx, frozen); cerr != nil && !errors.Is(cerr, ErrMoveChanged) {
			log.Error("cancelling the failed move; its old owner cancels it once it has been frozen too long", zap.Error(cerr))
		}
		if err := p.dropIfMoved(ctx, mv.Topic, mv.Partition, true); err != nil && !errors.Is(err, runtime.ErrAssigned) {
			log.Warn("dropping what a failed move installed here", zap.Error(err))
		}
	}
	return false // pulled again after a pause (retryAt): never a tight loop of whole copies (found by review)
}

// copyPartition pulls the partition from src into a receive and commits
// it; the move returned is the frozen one, once the old owner froze it.
func (m *mover) copyPartition(ctx context.Context, mv Move, src Location, log *zap.Logger) (Move, error) {
	tr := m.p.transfer
	first, err := tr.Listing(ctx, src, mv)
	if err != nil {
		return mv, err
	}
	r, err := m.p.node.ReceivePartition(ctx, mv.Topic, mv.Partition, mv.Incarnation)
	if err != nil {
		return mv, err
	}
	committed := false
	defer func() {
		if !committed {
			r.Abort()
		}
	}()
	if r.AssignedAtStart() {
		// The replica gave the partition to this node since the pull
		// began (a lost node's, given to the node pulling it): this node
		// may serve it, and an install would replace what it acked.
		return mv, fmt.Errorf("%w: %s/%d is this node's already", runtime.ErrAssigned, mv.Topic, mv.Partition)
	}
	written := map[string]int64{}
	// The sealed segments (all but the newest) while the old owner serves
	// on: they no longer change. Again while a round found more than one
	// newly sealed, so what the freeze leaves to copy (while no node
	// serves the partition) is about one segment, however busy the
	// partition or large its history.
	listing := first
	for round := 0; ; round++ {
		copied := 0
		for i, s := range listing.Segments {
			if i == len(listing.Segments)-1 {
				break // the active segment: after the freeze
			}
			if _, done := written[s.Name]; done {
				continue
			}
			if err := m.fetchFile(ctx, src, mv, s, r); err != nil {
				return mv, err
			}
			written[s.Name] = s.Size
			copied++
		}
		if copied <= 1 || round == maxPreCopyRounds {
			break
		}
		if listing, err = tr.Listing(ctx, src, mv); err != nil {
			return mv, err
		}
	}
	final, err := tr.Freeze(ctx, src, mv)
	if err != nil {
		return mv, err
	}
	frozen := final.Move
	if frozen.ID != mv.ID || frozen.State != MoveFrozen {
		return mv, fmt.Errorf("the old owner answered the freeze with move %+v", frozen)
	}
	log.Info("partition frozen by its old owner; copying what it holds since", zap.Int("segments", len(final.Segments)))
	keep := map[string]bool{}
	for _, s := range final.Segments {
		keep[s.Name] = true
		if size, ok := written[s.Name]; ok {
			if size != s.Size {
				return frozen, fmt.Errorf("sealed segment %s was %d bytes, now %d", s.Name, size, s.Size)
			}
			continue
		}
		if err := m.fetchFile(ctx, src, frozen, s, r); err != nil {
			return frozen, err
		}
	}
	for name := range written {
		if !keep[name] { // retention deleted it meanwhile
			if err := r.Remove(name); err != nil {
				return frozen, err
			}
		}
	}
	if final.Known {
		b, err := wire.EncodeOffsetFile(final.HighWatermark)
		if err != nil {
			return frozen, err
		}
		if err := r.WriteFile(wire.HWMFileName, int64(len(b)), bytes.NewReader(b[:])); err != nil {
			return frozen, err
		}
	}
	for _, f := range final.Dictionaries { // the topic's dictionaries: the frames may name any of them
		if err := m.fetchFile(ctx, src, frozen, f, r); err != nil {
			return frozen, err
		}
	}
	for _, f := range final.Consumer { // the queue consumer's progress: acks move with the partition
		if err := m.fetchFile(ctx, src, frozen, f, r); err != nil {
			return frozen, err
		}
	}
	for _, c := range final.Cursors {
		b, err := wire.EncodeOffsetFile(c.Position)
		if err != nil {
			return frozen, err
		}
		if err := r.WriteFile(c.Name, int64(len(b)), bytes.NewReader(b[:])); err != nil {
			return frozen, err
		}
	}
	committed = true
	return frozen, r.Commit(ctx)
}

// fetchFile streams one file of the old owner's listing (a segment, a
// consumer progress file) into the receive.
func (m *mover) fetchFile(ctx context.Context, src Location, mv Move, f TransferFile, r *runtime.Receiver) error {
	rc, err := m.p.transfer.File(ctx, src, mv, f)
	if err != nil {
		return err
	}
	defer rc.Close()
	return r.WriteFile(f.Name, f.Size, rc)
}

// release asks the old owner to drop its copy; if it cannot be reached,
// its mover drops it at its next look (dropStaleCopies).
func (m *mover) release(ctx context.Context, src Location, mv Move, log *zap.Logger) {
	if err := m.p.transfer.Release(ctx, src, mv.Topic, mv.Partition); err != nil {
		log.Warn("the old owner did not drop its copy now; it does at its next start", zap.Error(err))
	}
}
