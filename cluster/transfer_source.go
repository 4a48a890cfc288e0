package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"
)

// The old owner's side of a move: what a Transfer's calls reach. A move's
// new owner finds the move (OutgoingMove), lists the partition while the
// old owner serves on (MoveListing) and reads its files (OpenMoveFile),
// then asks for the freeze (FreezeMove), which stops this node serving it
// and lists the final files; once the move completed, it asks this node
// to drop its copy (ReleasePartition). None of them but the release takes
// the partition's move lock: until the move completes the partition is
// this node's in etcd, so no drop of it can land meanwhile (dropIfMoved
// confirms another owner first), nor a set-aside (only of a partition
// given away from this node) or an install (only of one moving here).

// ErrMoveNotFound: no move out of this node under way has the id, in
// this node's replica or in etcd.
var ErrMoveNotFound = errors.New("cluster: no such move out of this node under way")

// ErrNotCaughtUp: this node's replica could not catch up with etcd in
// time to answer (etcd away, or slow); the caller may retry.
var ErrNotCaughtUp = errors.New("cluster: this node's replica could not catch up with etcd")

// findMoveWait bounds how long OutgoingMove waits for the replica to
// catch up with etcd for a move it does not hold (one asked through
// another node a moment before).
const findMoveWait = 2 * time.Second

// OutgoingMove finds the move out of this node whose id is id, in the
// replica or, when it does not hold it, once the replica caught up with
// etcd (EtcdMetastore.FindMove), for at most findMoveWait:
// ErrMoveNotFound when etcd holds no such move either, or it is not out
// of this node; ErrNotCaughtUp when the catch-up failed.
func (p *Participant) OutgoingMove(ctx context.Context, id string) (Move, error) {
	ctx, cancel := context.WithTimeout(ctx, findMoveWait)
	defer cancel()
	mv, found, err := p.ms.FindMove(ctx, id)
	switch {
	case err != nil:
		return Move{}, fmt.Errorf("%w: looking for move %q: %w", ErrNotCaughtUp, id, err)
	case !found || mv.From != p.id:
		return Move{}, fmt.Errorf("%w: %q", ErrMoveNotFound, id)
	}
	return mv, nil
}

// MoveListing lists the partition of mv (as OutgoingMove found it) while
// this node still serves it: the sealed segments, copied before the
// freeze. Of a move frozen already (a pull taken up again after the
// freeze) the log is kept closed first: a freeze whose answer was lost may
// have left it open. A topic of another incarnation than the move's is
// ErrMoveChanged.
func (p *Participant) MoveListing(ctx context.Context, mv Move) (TransferListing, error) {
	if mv.State == MoveFrozen {
		if err := p.node.FreezePartition(ctx, mv.Topic, mv.Partition); err != nil {
			return TransferListing{}, err
		}
	}
	return p.listing(ctx, mv)
}

// FreezeMove stops this node serving the partition of mv (as
// OutgoingMove found it), the move's record frozen and then the log
// closed between two commits, and lists its final files with the frozen
// move. Asked again of a frozen move, it lists them again. A move that
// changed meanwhile (cancelled) is ErrMoveChanged.
func (p *Participant) FreezeMove(ctx context.Context, mv Move) (TransferListing, error) {
	if mv.State == MoveRequested {
		frozen, err := p.ms.FreezeMove(ctx, mv, time.Now())
		if errors.Is(err, ErrMoveChanged) {
			return TransferListing{}, fmt.Errorf("%w: the move changed meanwhile (cancelled?)", ErrMoveChanged)
		}
		if err != nil {
			return TransferListing{}, err
		}
		mv = frozen
		p.logger.Info("partition frozen for its move: served no more here", zap.String("move", mv.ID),
			zap.String("topic", mv.Topic), zap.Int("partition", mv.Partition), zap.String("to", mv.To))
	}
	if err := p.node.FreezePartition(ctx, mv.Topic, mv.Partition); err != nil {
		return TransferListing{}, err
	}
	return p.listing(ctx, mv)
}

// listing is the node's transfer listing of mv's partition, refused
// (ErrMoveChanged) when the topic is another incarnation than the move's.
func (p *Participant) listing(ctx context.Context, mv Move) (TransferListing, error) {
	l, err := p.node.TransferListing(ctx, mv.Topic, mv.Partition)
	if err != nil {
		return TransferListing{}, err
	}
	if l.Incarnation != mv.Incarnation {
		return TransferListing{}, fmt.Errorf("%w: the topic is another incarnation than the move's", ErrMoveChanged)
	}
	out := TransferListing{Move: mv, HighWatermark: l.HighWatermark, Known: l.Known,
		Segments: []TransferFile{}, Cursors: []TransferCursor{}, Consumer: []TransferFile{}, Dictionaries: []TransferFile{}}
	for _, f := range l.Dictionaries {
		out.Dictionaries = append(out.Dictionaries, TransferFile{Name: f.Name, Size: f.Size})
	}
	for _, f := range l.Consumer {
		out.Consumer = append(out.Consumer, TransferFile{Name: f.Name, Size: f.Size})
	}
	for _, s := range l.Segments {
		out.Segments = append(out.Segments, TransferFile{Name: s.Name, Size: s.Size})
	}
	for _, c := range l.Cursors {
		out.Cursors = append(out.Cursors, TransferCursor{Name: c.Name, Position: c.Position})
	}
	return out, nil
}

// OpenMoveFile opens one file of mv's partition (mv as OutgoingMove
// found it) that a listing named, a segment or a consumer progress file,
// to read its first size bytes; the caller closes it. A file holding fewer
// is ErrMoveChanged.
func (p *Participant) OpenMoveFile(ctx context.Context, mv Move, name string, size int64) (io.ReadCloser, error) {
	f, err := p.node.OpenTransferFile(ctx, mv.Topic, mv.Partition, name)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.Size < size {
		f.Close()
		return nil, fmt.Errorf("%w: the file holds %d bytes, fewer than the %d asked", ErrMoveChanged, st.Size, size)
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, 0, size), f}, nil
}

// ReleasePartition drops this node's copy of a partition once etcd
// confirms another node owns it (a move's new owner asks once the move
// completed), under the partition's move lock, so a pull of it under way
// here is waited for; runtime.ErrAssigned when the partition is this
// node's or moving here.
func (p *Participant) ReleasePartition(ctx context.Context, topic string, partition int) error {
	return p.dropIfMoved(ctx, topic, partition, true)
}
