package cluster

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/narad-io/storage/runtime"
	"go.uber.org/zap"
)

// mover runs this node's side of partition moves (moves.go): it pulls
// each partition moving to this node from its old owner (pull.go: the
// sealed segments while the old owner serves on, then a freeze and the
// rest), installs it, and completes the move; it cancels a move out of
// this node that its new owner left frozen past freezeTimeout, so the
// partition is served again; and it drops this node's copies of
// partitions etcd confirms other nodes own (a move's old owner whose
// release never came).
//
// Invariants: one pull per partition runs at a time, and at most
// maxPulls in all (pulling, under mu); a pull holds the partition's move
// lock (partitionLocks) from its receive to its completion's outcome.
type mover struct {
	p      *Participant
	logger *zap.Logger

	mu      sync.Mutex
	pulling map[string]bool      // "topic/p" of the pulls running
	retryAt map[string]time.Time // "topic/p" of a failed pull: not again before

	wake chan struct{}
	stop context.CancelFunc
	done sync.WaitGroup
}

// freezeTimeout is how long a move may stay frozen before its old owner
// cancels it and serves the partition again: the final catch-up copies
// the active segment only.
const freezeTimeout = 2 * time.Minute

// maxPulls bounds the moves a node pulls at once (a rebalance asks for
// many): the others wait their turn.
const maxPulls = 2

// staleCopyPass is how often the mover drops copies of partitions other
// nodes own (a release that never came).
const staleCopyPass = time.Minute

// moverPass is how often the mover looks at the moves besides when its
// replica changes (frozen moves age without a change).
const moverPass = 5 * time.Second

func startMover(p *Participant) *mover {
	m := &mover{p: p, logger: p.logger.Named("mover"), pulling: map[string]bool{}, retryAt: map[string]time.Time{}, wake: make(chan struct{}, 1)}
	ctx, stop := context.WithCancel(context.Background())
	m.stop = stop
	unsubscribe := p.ms.Subscribe(func(string) {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	})
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		defer unsubscribe()
		m.run(ctx)
	}()
	return m
}

// close stops the mover and waits for its pulls.
func (m *mover) close() {
	m.stop()
	m.done.Wait()
}

func (m *mover) run(ctx context.Context) {
	m.dropStaleCopies(ctx)
	t := time.NewTicker(moverPass)
	defer t.Stop()
	stale := time.NewTicker(staleCopyPass)
	defer stale.Stop()
	for {
		m.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		case <-t.C:
		case <-stale.C:
			m.dropStaleCopies(ctx)
		}
	}
}

// pass starts a pull of each move to this node not being pulled, and
// cancels each move out of this node frozen too long.
func (m *mover) pass(ctx context.Context) {
	p := m.p
	moves := p.ms.Moves()
	m.mu.Lock()
	for part := range m.retryAt { // only moves still under way wait their turn
		if !slices.ContainsFunc(moves, func(mv Move) bool {
			return mv.To == p.id && mv.Topic+"/"+strconv.Itoa(mv.Partition) == part
		}) {
			delete(m.retryAt, part)
		}
	}
	m.mu.Unlock()
	for _, mv := range moves {
		switch {
		case mv.To == p.id:
			if !p.Serving() {
				continue // fenced or not registered: it could not complete the move (CompleteMove)
			}
			part := mv.Topic + "/" + strconv.Itoa(mv.Partition)
			if src, ok := p.ms.Locate(mv.Topic, mv.Partition); !ok || src.NodeID != mv.From || src.Addr == "" {
				continue // its old owner is not live: no slot taken from the moves that can run
			}
			m.mu.Lock()
			started, full := m.pulling[part], len(m.pulling) >= maxPulls
			due := !time.Now().Before(m.retryAt[part])
			take := !started && !full && due
			if take {
				m.pulling[part] = true
			}
			m.mu.Unlock()
			if take {
				m.done.Add(1)
				go func() {
					defer m.done.Done()
					failed := !m.pull(ctx, mv)
					m.mu.Lock()
					delete(m.pulling, part)
					if failed { // its turn again after a pause; other moves run meanwhile
						m.retryAt[part] = time.Now().Add(moverPass)
					} else {
						delete(m.retryAt, part)
					}
					m.mu.Unlock()
					select { // another pass: the move may be there still (a pull to retry)
					case m.wake <- struct{}{}:
					default:
					}
				}()
			}
		case mv.From == p.id && mv.State == MoveFrozen && time.Since(time.UnixMilli(mv.FrozenAtMs)) > freezeTimeout:
			if err := p.ms.CancelMove(ctx, mv); err == nil {
				m.logger.Warn("a move's new owner left the partition frozen too long: cancelled, served here again",
					zap.String("move", mv.ID), zap.String("topic", mv.Topic), zap.Int("partition", mv.Partition), zap.String("to", mv.To))
			}
		}
	}
}

// dropStaleCopies drops this node's copies of partitions other nodes own
// (a move's old owner that stopped before its release), each confirmed
// with etcd first.
func (m *mover) dropStaleCopies(ctx context.Context) {
	p := m.p
	topics, err := p.ms.Topics(ctx)
	if err != nil {
		return
	}
	moving := map[string]bool{}
	for _, mv := range p.ms.Moves() {
		moving[mv.Topic+"/"+strconv.Itoa(mv.Partition)] = true
	}
	for _, t := range topics {
		dirs, err := p.node.PartitionDirs(t.Name)
		if err != nil {
			continue
		}
		for _, part := range dirs {
			if loc, ok := p.ms.Locate(t.Name, part); !ok || loc.NodeID == p.id || moving[t.Name+"/"+strconv.Itoa(part)] {
				continue
			}
			if err := p.dropIfMoved(ctx, t.Name, part, false); err != nil && !errors.Is(err, runtime.ErrAssigned) {
				m.logger.Warn("dropping a copy of a partition another node owns", zap.String("topic", t.Name), zap.Int("partition", part), zap.Error(err))
			}
		}
	}
}
