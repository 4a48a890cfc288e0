package cluster

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/narad-io/storage/runtime"
)

// partitionLocks are this node's move locks, one a partition: a pull
// holds its partition's from its receive to its completion's outcome, and
// a drop or a set-aside takes it, so neither lands between a pull's
// install and the completion that makes it this node's (found by review:
// the install was dropped, and the completed move served an empty
// partition).
type partitionLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex // "topic/p" -> the partition's move lock; under mu
}

// lock takes a partition's move lock.
func (l *partitionLocks) lock(topic string, p int) (unlock func()) {
	mu := l.of(topic, p)
	mu.Lock()
	return mu.Unlock
}

func (l *partitionLocks) of(topic string, p int) *sync.Mutex {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.locks == nil {
		l.locks = map[string]*sync.Mutex{}
	}
	k := topic + "/" + strconv.Itoa(p)
	mu := l.locks[k]
	if mu == nil {
		mu = &sync.Mutex{}
		l.locks[k] = mu
	}
	return mu
}

// dropIfMoved drops this node's copy of a partition once etcd confirms
// (linearizably, never the replica) that another node owns it, and no
// move to this node is under way; else runtime.ErrAssigned. Without
// wait, a partition whose move lock is held (a pull streaming it) is left
// for a later look.
func (p *Participant) dropIfMoved(ctx context.Context, topic string, part int, wait bool) error {
	mu := p.locks.of(topic, part)
	if wait {
		mu.Lock()
	} else if !mu.TryLock() {
		return fmt.Errorf("%w: %s/%d is being pulled", runtime.ErrAssigned, topic, part)
	}
	defer mu.Unlock()
	for _, mv := range p.ms.Moves() {
		if mv.Topic == topic && mv.Partition == part && mv.To == p.id {
			return fmt.Errorf("%w: %s/%d is moving here", runtime.ErrAssigned, topic, part)
		}
	}
	owner, ok, err := p.ms.ConfirmOwner(ctx, topic, part)
	if err != nil {
		return err
	}
	if !ok || owner == p.id {
		return fmt.Errorf("%w: %s/%d", runtime.ErrAssigned, topic, part)
	}
	return p.node.DropPartition(ctx, topic, part)
}
