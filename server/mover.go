package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/narad-io/storage/cluster"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// mover runs this node's side of partition moves (cluster.Move): it pulls
// each partition moving to this node from its old owner (the sealed
// segments while the old owner serves on, then a freeze and the rest),
// installs it, and completes the move; it cancels a move out of this node
// that its new owner left frozen past freezeTimeout, so the partition is
// served again; and it drops this node's copies of partitions etcd
// confirms other nodes own (a move's old owner whose release never came).
//
// Invariants: one pull per partition runs at a time, and at most
// maxPulls in all (pulling, under mu); a pull holds the partition's move
// lock (clusterNode.lockPartition) from its receive to its completion's
// outcome.
type mover struct {
	c      *clusterNode
	node   *runtime.Node
	peers  *http.Client
	token  string
	scheme string
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

// maxPreCopyRounds bounds the listings a pull copies sealed segments from
// before it asks for the freeze.
const maxPreCopyRounds = 5

// staleCopyPass is how often the mover drops copies of partitions other
// nodes own (a release that never came).
const staleCopyPass = time.Minute

// moverPass is how often the mover looks at the moves besides when its
// replica changes (frozen moves age without a change).
const moverPass = 5 * time.Second

func startMover(c *clusterNode, node *runtime.Node, token []byte, tlsConfig *tls.Config, logger *zap.Logger) *mover {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConfig
	tr.ResponseHeaderTimeout = 30 * time.Second // a peer that took the call but never answers
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	m := &mover{c: c, node: node, peers: &http.Client{Transport: tr}, token: string(token), scheme: scheme,
		logger: logger.Named("mover"), pulling: map[string]bool{}, retryAt: map[string]time.Time{}, wake: make(chan struct{}, 1)}
	ctx, stop := context.WithCancel(context.Background())
	m.stop = stop
	unsubscribe := c.ms.Subscribe(func(string) {
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

// close stops the mover and waits for its pulls (their requests end with
// its context; a pull cut short leaves its move to be taken up again).
func (m *mover) close() {
	m.stop()
	m.done.Wait()
	m.peers.CloseIdleConnections()
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
	moves := m.c.ms.Moves()
	m.mu.Lock()
	for part := range m.retryAt { // only moves still under way wait their turn
		if !slices.ContainsFunc(moves, func(mv cluster.Move) bool {
			return mv.To == m.c.id && mv.Topic+"/"+strconv.Itoa(mv.Partition) == part
		}) {
			delete(m.retryAt, part)
		}
	}
	m.mu.Unlock()
	for _, mv := range moves {
		switch {
		case mv.To == m.c.id:
			if !m.c.Serving() {
				continue // fenced or not registered: it could not complete the move (CompleteMove)
			}
			part := mv.Topic + "/" + strconv.Itoa(mv.Partition)
			if src, ok := m.c.ms.Locate(mv.Topic, mv.Partition); !ok || src.NodeID != mv.From || src.Addr == "" {
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
		case mv.From == m.c.id && mv.State == cluster.MoveFrozen && time.Since(time.UnixMilli(mv.FrozenAtMs)) > freezeTimeout:
			if err := m.c.ms.CancelMove(ctx, mv); err == nil {
				m.logger.Warn("a move's new owner left the partition frozen too long: cancelled, served here again",
					zap.String("move", mv.ID), zap.String("topic", mv.Topic), zap.Int("partition", mv.Partition), zap.String("to", mv.To))
			}
		}
	}
}

// pull moves one partition here, and reports whether it did. Before the
// freeze a failure leaves the move requested, to be pulled again after a
// pause; after it, the move is cancelled (the old owner serves again) and
// whatever was installed here is dropped.
func (m *mover) pull(ctx context.Context, mv cluster.Move) bool {
	log := m.logger.With(zap.String("move", mv.ID), zap.String("topic", mv.Topic), zap.Int("partition", mv.Partition), zap.String("from", mv.From))
	src, ok := m.c.ms.Locate(mv.Topic, mv.Partition)
	if !ok || src.NodeID != mv.From || src.Addr == "" {
		return false // its old owner went meanwhile
	}
	start := time.Now()
	unlock := m.c.lockPartition(mv.Topic, mv.Partition)
	frozen, err := m.transfer(ctx, mv, src.Addr, log)
	if err == nil {
		err = m.c.ms.CompleteMove(ctx, frozen)
	}
	unlock()
	if err == nil {
		log.Info("partition moved here", zap.Duration("took", time.Since(start)))
		m.release(ctx, src.Addr, mv, log)
		return true
	}
	if ctx.Err() != nil {
		return false // stopping: the move is taken up again after a restart
	}
	log.Error("partition move failed", zap.Error(err))
	if frozen.State == cluster.MoveFrozen {
		if cerr := m.c.ms.CancelMove(ctx, frozen); cerr != nil && !errors.Is(cerr, cluster.ErrMoveChanged) {
			log.Error("cancelling the failed move; its old owner cancels it once it has been frozen too long", zap.Error(cerr))
		}
		m.dropIfMoved(ctx, mv, log)
	}
	return false // pulled again after a pause (retryAt): never a tight loop of whole copies (found by review)
}

// transfer pulls the partition into a receive and commits it; the move
// returned is the frozen one, once the old owner froze it.
func (m *mover) transfer(ctx context.Context, mv cluster.Move, addr string, log *zap.Logger) (cluster.Move, error) {
	var first transferBody
	if err := m.call(ctx, http.MethodGet, addr, "/v1/internal/moves/"+url.PathEscape(mv.ID)+"/listing", &first); err != nil {
		return mv, err
	}
	r, err := m.node.ReceivePartition(ctx, mv.Topic, mv.Partition, mv.Incarnation)
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
			if err := m.fetchFile(ctx, addr, mv, s, r); err != nil {
				return mv, err
			}
			written[s.Name] = s.Size
			copied++
		}
		if copied <= 1 || round == maxPreCopyRounds {
			break
		}
		listing = transferBody{}
		if err := m.call(ctx, http.MethodGet, addr, "/v1/internal/moves/"+url.PathEscape(mv.ID)+"/listing", &listing); err != nil {
			return mv, err
		}
	}
	var final transferBody
	if err := m.call(ctx, http.MethodPost, addr, "/v1/internal/moves/"+url.PathEscape(mv.ID)+"/freeze", &final); err != nil {
		return mv, err
	}
	frozen := final.Move
	if frozen.ID != mv.ID || frozen.State != cluster.MoveFrozen {
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
		if err := m.fetchFile(ctx, addr, frozen, s, r); err != nil {
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
	for _, f := range final.Consumer { // the queue consumer's progress: acks move with the partition
		if err := m.fetchFile(ctx, addr, frozen, f, r); err != nil {
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
func (m *mover) fetchFile(ctx context.Context, addr string, mv cluster.Move, s segmentBody, r *runtime.Receiver) error {
	path := "/v1/internal/moves/" + url.PathEscape(mv.ID) + "/files/" + url.PathEscape(s.Name) + "?size=" + strconv.FormatInt(s.Size, 10)
	resp, err := m.send(ctx, http.MethodGet, addr, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return r.WriteFile(s.Name, s.Size, resp.Body)
}

// release asks the old owner to drop its copy; if it cannot be reached,
// its mover drops it at its next look (dropStaleCopies).
func (m *mover) release(ctx context.Context, addr string, mv cluster.Move, log *zap.Logger) {
	path := "/v1/internal/partitions/" + url.PathEscape(mv.Topic) + "/" + strconv.Itoa(mv.Partition) + "/release"
	if err := m.call(ctx, http.MethodPost, addr, path, nil); err != nil {
		log.Warn("the old owner did not drop its copy now; it does at its next start", zap.Error(err))
	}
}

// dropIfMoved drops what a failed pull installed here, once etcd confirms
// the partition is another node's.
func (m *mover) dropIfMoved(ctx context.Context, mv cluster.Move, log *zap.Logger) {
	if err := m.c.dropIfMoved(ctx, m.node, mv.Topic, mv.Partition, true); err != nil && !errors.Is(err, runtime.ErrAssigned) {
		log.Warn("dropping what a failed move installed here", zap.Error(err))
	}
}

// dropStaleCopies drops this node's copies of partitions other nodes own
// (a move's old owner that stopped before its release), each confirmed
// with etcd first.
func (m *mover) dropStaleCopies(ctx context.Context) {
	topics, err := m.c.ms.Topics(ctx)
	if err != nil {
		return
	}
	moving := map[string]bool{}
	for _, mv := range m.c.ms.Moves() {
		moving[mv.Topic+"/"+strconv.Itoa(mv.Partition)] = true
	}
	for _, t := range topics {
		dirs, err := m.node.PartitionDirs(t.Name)
		if err != nil {
			continue
		}
		for _, p := range dirs {
			if loc, ok := m.c.ms.Locate(t.Name, p); !ok || loc.NodeID == m.c.id || moving[t.Name+"/"+strconv.Itoa(p)] {
				continue
			}
			if err := m.c.dropIfMoved(ctx, m.node, t.Name, p, false); err != nil && !errors.Is(err, runtime.ErrAssigned) {
				m.logger.Warn("dropping a copy of a partition another node owns", zap.String("topic", t.Name), zap.Int("partition", p), zap.Error(err))
			}
		}
	}
}

// send makes one call to a peer with the cluster's token; an answer that
// is not a success is its error.
func (m *mover) send(ctx context.Context, method, addr, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, addr+path, nil)
	if err != nil {
		return nil, err
	}
	if m.token != "" {
		req.Header.Set("Authorization", "Bearer "+m.token)
	}
	resp, err := m.peers.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	return resp, nil
}

// call is send with a JSON answer decoded into out (nil: none).
func (m *mover) call(ctx context.Context, method, addr, path string, out any) error {
	resp, err := m.send(ctx, method, addr, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out)
}
