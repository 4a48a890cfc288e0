package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidwall/wal"
	etcdwal "go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// The peers, each in its durable mode, as its documentation says a user
// who must not lose an acknowledged write runs it.

// etcdWAL is etcd's raft write-ahead log: each batch one Save of raft
// entries, which fsyncs (64 MB preallocated segments).
type etcdWAL struct {
	dir   string
	w     *etcdwal.WAL
	index uint64
}

func openEtcdWAL(dir string, _ Cell) (Engine, error) {
	w, err := etcdwal.Create(zap.NewNop(), dir, nil)
	if err != nil {
		return nil, err
	}
	return &etcdWAL{dir: dir, w: w}, nil
}

func (e *etcdWAL) Commit(batch [][]byte) error {
	ents := make([]*raftpb.Entry, len(batch))
	for i, rec := range batch {
		e.index++
		ents[i] = &raftpb.Entry{Term: ptr(uint64(1)), Index: ptr(e.index), Type: ptr(raftpb.EntryNormal), Data: rec}
	}
	return e.w.Save(&raftpb.HardState{Term: ptr(uint64(1)), Commit: ptr(e.index)}, ents)
}

// ReadAll closes the log and reads it the way a restarting member does.
func (e *etcdWAL) ReadAll(fn func([]byte)) error {
	if err := e.w.Close(); err != nil {
		return err
	}
	w, err := etcdwal.Open(zap.NewNop(), e.dir, &walpb.Snapshot{})
	if err != nil {
		return err
	}
	e.w = w
	_, _, ents, err := w.ReadAll()
	if err != nil {
		return err
	}
	for _, ent := range ents {
		fn(ent.Data)
	}
	return nil
}

func (e *etcdWAL) Close() error { return e.w.Close() }

func ptr[T any](v T) *T { return &v }

// pebbleDB is CockroachDB's LSM: each batch one pebble.Batch committed
// with pebble.Sync, keys the big-endian sequence number.
type pebbleDB struct {
	db  *pebble.DB
	mu  sync.Mutex
	seq uint64
}

type quietPebbleLogger struct{}

func (quietPebbleLogger) Infof(string, ...any)         {}
func (quietPebbleLogger) Errorf(string, ...any)        {}
func (quietPebbleLogger) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

func openPebble(dir string, _ Cell) (Engine, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietPebbleLogger{}})
	if err != nil {
		return nil, err
	}
	return &pebbleDB{db: db}, nil
}

func (p *pebbleDB) Commit(batch [][]byte) error {
	b := p.db.NewBatch()
	defer b.Close()
	p.mu.Lock()
	for _, rec := range batch {
		p.seq++
		if err := b.Set(binary.BigEndian.AppendUint64(nil, p.seq), rec, nil); err != nil {
			p.mu.Unlock()
			return err
		}
	}
	p.mu.Unlock()
	return b.Commit(pebble.Sync)
}

func (p *pebbleDB) ReadAll(fn func([]byte)) error {
	it, err := p.db.NewIter(nil)
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		fn(it.Value())
	}
	return errors.Join(it.Error(), it.Close())
}

func (p *pebbleDB) Close() error { return p.db.Close() }

// tidwallWAL is tidwall/wal: each batch one WriteBatch, which fsyncs.
type tidwallWAL struct {
	l     *wal.Log
	index uint64
}

func openTidwall(dir string, _ Cell) (Engine, error) {
	l, err := wal.Open(dir, nil) // the defaults: fsync after every write
	if err != nil {
		return nil, err
	}
	return &tidwallWAL{l: l}, nil
}

func (t *tidwallWAL) Commit(batch [][]byte) error {
	var b wal.Batch
	for _, rec := range batch {
		t.index++
		b.Write(t.index, rec)
	}
	return t.l.WriteBatch(&b)
}

func (t *tidwallWAL) ReadAll(fn func([]byte)) error {
	for i := uint64(1); i <= t.index; i++ {
		rec, err := t.l.Read(i)
		if err != nil {
			return err
		}
		fn(rec)
	}
	return nil
}

func (t *tidwallWAL) Close() error { return t.l.Close() }

// jetStream is NATS JetStream's file store with sync_always, in an
// embedded server, published to over loopback by the Go client: each
// batch published asynchronously, then every acknowledgement awaited.
type jetStream struct {
	s      *server.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	count  int
}

const jsSubject = "bench"

func openJetStream(dir string, c Cell) (Engine, error) {
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: dir, SyncAlways: true,
		MaxPayload: int32(max(c.RecordBytes+1024, 1<<20)),
	})
	if err != nil {
		return nil, err
	}
	// Start does not block: it opens the store and the client listener and
	// leaves the accept loops to the server's goroutines, which Shutdown
	// waits for. When it gives up (a store directory it cannot make, a
	// port) it returns with no listener, and none will come.
	s.Start()
	if s.Addr() == nil {
		s.Shutdown()
		return nil, fmt.Errorf("jetstream: the server did not start (its store directory %s, or its port)", dir)
	}
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, errors.New("jetstream: server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		s.Shutdown()
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*max(c.Batch, 1)))
	if err != nil {
		nc.Close()
		s.Shutdown()
		return nil, err
	}
	stream, err := js.CreateStream(bg, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{jsSubject}, Storage: jetstream.FileStorage})
	if err != nil {
		nc.Close()
		s.Shutdown()
		return nil, err
	}
	return &jetStream{s: s, nc: nc, js: js, stream: stream}, nil
}

func (j *jetStream) Commit(batch [][]byte) error {
	futures := make([]jetstream.PubAckFuture, len(batch))
	for i, rec := range batch {
		f, err := j.js.PublishAsync(jsSubject, rec)
		if err != nil {
			return err
		}
		futures[i] = f
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		case <-time.After(time.Minute):
			return errors.New("jetstream: no acknowledgement in a minute")
		}
	}
	j.count += len(batch)
	return nil
}

// ReadAll reads the stream through an ordered consumer, as a replaying
// subscriber does.
func (j *jetStream) ReadAll(fn func([]byte)) error {
	ctx, cancel := context.WithTimeout(bg, 10*time.Minute)
	defer cancel()
	cons, err := j.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err
	}
	for got := 0; got < j.count; {
		msgs, err := cons.Fetch(min(j.count-got, 4096), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		n := 0
		for m := range msgs.Messages() {
			fn(m.Data())
			n++
		}
		if err := msgs.Error(); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("jetstream: read %d of %d messages, then nothing", got, j.count)
		}
		got += n
	}
	return nil
}

func (j *jetStream) Close() error {
	j.nc.Close()
	j.s.Shutdown()
	return os.RemoveAll(j.s.StoreDir())
}
