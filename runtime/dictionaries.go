package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// Dictionary training bounds (docs/design.md, "Dictionaries").
const (
	// DefaultDictionarySamples is how many of a topic's newest records a
	// training reads when asked for no number: spread over the partitions
	// this node owns.
	DefaultDictionarySamples = 2000
	// MaxDictionarySamples bounds the records one training reads.
	MaxDictionarySamples = 100_000
	// MaxTopicDictionaries bounds the dictionaries a node trains for a
	// topic: a dictionary is kept as long as the topic (a frame may name
	// it), so a training while the node holds this many is refused
	// (ErrTooManyDictionaries). A move's dictionaries are never refused
	// for the count (the moved frames may name any), so a node may hold
	// more: at most this many for each node that trained for the topic.
	MaxTopicDictionaries = 16
	// dictionarySampleReadBytes bounds one read of training samples.
	dictionarySampleReadBytes = 8 << 20
)

// ErrTooManyDictionaries: the topic holds MaxTopicDictionaries already.
var ErrTooManyDictionaries = errors.New("runtime: topic holds the most dictionaries it may")

// topicDictionaries holds each topic's dictionary set, loaded from the
// topic directory the first time one of its logs opens or a dictionary is
// trained. The zero value is ready.
//
// INVARIANT: an entry belongs to the incarnation it names: a set is never
// handed to a log of another incarnation (a recreate loads its own), and
// every dictionary in a set is in a file of the topic directory that was
// synced before it was added.
type topicDictionaries struct {
	mu     sync.Mutex
	topics map[string]loadedDictionaries
}

type loadedDictionaries struct {
	incarnation      wire.IncarnationID
	set              *codec.DictionarySet
	currentTrainedAt int64 // when the set's current dictionary was trained
}

// DictionaryInfo describes one dictionary of a topic.
type DictionaryInfo struct {
	ID          uint32
	Bytes       int
	TrainedAtMs int64
	Samples     int // records it was trained on; 0 when loaded from its file
}

// DictionaryTraining says how to train a topic's dictionary; zero fields
// take the defaults.
type DictionaryTraining struct {
	Samples  int // newest records to read, over the partitions this node owns
	MaxBytes int // the dictionary's size bound (codec.DefaultDictionaryBytes)
}

// trained notes that the topic's current dictionary was trained at ms.
func (td *topicDictionaries) trained(topic string, ms int64) {
	td.mu.Lock()
	defer td.mu.Unlock()
	if loaded, ok := td.topics[topic]; ok {
		loaded.currentTrainedAt = ms
		td.topics[topic] = loaded
	}
}

// forget drops a topic's set: its directory is going (a delete's purge).
func (td *topicDictionaries) forget(topic string) {
	td.mu.Lock()
	defer td.mu.Unlock()
	delete(td.topics, topic)
}

// dictionariesLocked returns the topic's dictionary set for the record's
// incarnation, loading it from the topic directory when it is not loaded
// yet; the caller holds the topic's guard, so no other load or training of
// the topic runs. A failure to read the directory or a file of it (the
// disk's, not a damaged file's) is returned and nothing is kept: the
// caller fails (an open is retried), and the next call reads again, so no
// frame is taken for one whose dictionary is lost.
func (n *Node) dictionariesLocked(rec TopicRecord) (*codec.DictionarySet, error) {
	td := &n.dictionaries
	td.mu.Lock()
	loaded, ok := td.topics[rec.Name]
	td.mu.Unlock()
	if ok && loaded.incarnation == rec.Incarnation {
		return loaded.set, nil
	}
	set, infos, err := n.loadDictionaries(rec.Name)
	if err != nil {
		return nil, err
	}
	loaded = loadedDictionaries{incarnation: rec.Incarnation, set: set}
	if len(infos) > 0 {
		loaded.currentTrainedAt = infos[0].TrainedAtMs // newest first: the current one
	}
	td.mu.Lock()
	defer td.mu.Unlock()
	if td.topics == nil {
		td.topics = make(map[string]loadedDictionaries)
	}
	td.topics[rec.Name] = loaded
	return set, nil
}

// loadDictionaries reads a topic's dictionary files (partition.
// ReadDictionaryFiles), logging each left out as damaged: the frames that
// name it read as damage, the others are served. err is a failure to read
// them at all (the disk's).
func (n *Node) loadDictionaries(topic string) (*codec.DictionarySet, []partition.DictionaryFileInfo, error) {
	set, infos, bad, err := partition.ReadDictionaryFiles(n.cfg.FS, filepath.Join(n.topicsDir, topic))
	if err != nil {
		return nil, nil, fmt.Errorf("dictionaries of %s: %w", topic, err)
	}
	for _, b := range bad {
		n.logger.Error("dictionary file damaged; frames that name it read as damage", zap.String("topic", topic), zap.String("file", b.Name), zap.Error(b.Err))
	}
	return set, infos, nil
}

// TrainDictionary trains a zstd dictionary on the newest records of the
// topic's partitions this node owns, stores it in the topic directory
// (durably, before anything uses it) and makes it the one the topic's
// logs on this node encode new frames with; frames written before keep
// naming theirs, which stays. Too few records (codec.MinTrainingSamples)
// or records nothing can be learnt from is codec.ErrBadDictionary.
func (n *Node) TrainDictionary(ctx context.Context, topic string, opts DictionaryTraining) (DictionaryInfo, error) {
	info, err := n.trainDictionary(ctx, topic, opts)
	n.countTraining(trainingOnRequest, err)
	return info, err
}

// trainDictionary is TrainDictionary, uncounted.
func (n *Node) trainDictionary(ctx context.Context, topic string, opts DictionaryTraining) (DictionaryInfo, error) {
	if opts.Samples == 0 {
		opts.Samples = DefaultDictionarySamples
	}
	if opts.Samples < codec.MinTrainingSamples || opts.Samples > MaxDictionarySamples {
		return DictionaryInfo{}, fmt.Errorf("%w: samples %d outside [%d, %d]", codec.ErrBadDictionary, opts.Samples, codec.MinTrainingSamples, MaxDictionarySamples)
	}
	rec, ok, err := n.ms.Topic(ctx, topic)
	if err != nil {
		return DictionaryInfo{}, err
	}
	if !ok {
		return DictionaryInfo{}, fmt.Errorf("%w: %s", ErrTopicNotFound, topic)
	}
	samples, err := n.dictionarySamples(ctx, rec, opts.Samples)
	if err != nil {
		return DictionaryInfo{}, err
	}
	d, err := codec.TrainDictionary(samples, opts.MaxBytes)
	if err != nil {
		return DictionaryInfo{}, err
	}
	info := DictionaryInfo{ID: d.ID(), Bytes: len(d.Bytes()), TrainedAtMs: time.Now().UnixMilli(), Samples: len(samples)}
	err = n.withTopic(topic, func(t *supervisor.GuardedTopic) error {
		// The record again, under the guard: a delete and recreate since
		// the samples were read must neither get their dictionary nor
		// have the old record judge the new directory's marker.
		if err := n.sameIncarnation(ctx, rec); err != nil {
			return err
		}
		if err := n.checkIncarnation(t, rec); err != nil {
			return err
		}
		set, err := n.dictionariesLocked(rec)
		if err != nil {
			return err
		}
		if set.Lookup(d.ID()) == nil && len(set.IDs()) >= MaxTopicDictionaries {
			return fmt.Errorf("%w: %s holds %d", ErrTooManyDictionaries, topic, MaxTopicDictionaries)
		}
		if err := partition.StoreDictionaryFile(n.cfg.FS, filepath.Join(n.topicsDir, topic), d, info.TrainedAtMs); err != nil {
			return fmt.Errorf("store dictionary %d of %s: %w", d.ID(), topic, err)
		}
		if err := set.Add(d); err != nil {
			return err
		}
		n.dictionaries.trained(rec.Name, info.TrainedAtMs)
		return set.SetCurrent(d.ID())
	})
	if err != nil {
		return DictionaryInfo{}, err
	}
	n.logger.Info("trained a dictionary", zap.String("topic", topic), zap.Uint32("id", info.ID),
		zap.Int("bytes", info.Bytes), zap.Int("samples", info.Samples))
	return info, nil
}

// Dictionaries lists the dictionaries of a topic this node holds, the
// current one (the one new frames use) first.
func (n *Node) Dictionaries(ctx context.Context, topic string) ([]DictionaryInfo, error) {
	rec, ok, err := n.ms.Topic(ctx, topic)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrTopicNotFound, topic)
	}
	var infos []DictionaryInfo
	err = n.withTopic(rec.Name, func(*supervisor.GuardedTopic) error {
		if marker, err := n.readMarker(filepath.Join(n.topicsDir, rec.Name)); err != nil || marker != rec.Incarnation {
			return nil // no directory of this incarnation yet (or a leftover of another): none
		}
		_, files, err := n.loadDictionaries(rec.Name) // newest first: the current one
		if err != nil {
			return err
		}
		for _, f := range files {
			infos = append(infos, DictionaryInfo{ID: f.ID, Bytes: f.Bytes, TrainedAtMs: f.TrainedAtMs})
		}
		return nil
	})
	return infos, err
}

// dictionarySamples reads up to want of the topic's newest records, spread
// over the partitions this node owns, each as the one-record payload a
// frame of it holds ([len][envelope]): what the dictionary will compress.
// It holds at most codec.MaxTrainingBytes of them (what a training takes),
// and leaves out a record larger than a dictionary may be
// (codec.MaxDictionaryBytes): a frame that large finds its own matches.
func (n *Node) dictionarySamples(ctx context.Context, rec TopicRecord, want int) ([][]byte, error) {
	owned, err := n.owned(ctx, rec)
	if err != nil {
		return nil, err
	}
	if len(owned) == 0 {
		return nil, fmt.Errorf("%w: %s/*: this node owns no partition of it", ErrNotAssigned, rec.Name)
	}
	perPartition := max(want/len(owned), 1)
	var samples [][]byte
	held := 0 // bytes of samples
	for _, p := range owned {
		var start, hwm int64
		if err := n.withLog(ctx, supervisor.Key{Topic: rec.Name, Partition: p}, func(l *partition.Log) error {
			start, hwm = l.StartOffset(), l.HighWatermark()
			return nil
		}); err != nil {
			return nil, err
		}
		offset := max(hwm-int64(perPartition), start)
	read:
		for offset < hwm && len(samples) < want {
			res, err := n.Read(ctx, rec.Name, p, offset, perPartition, dictionarySampleReadBytes)
			var unreadable *partition.UnreadableError
			switch {
			case errors.As(err, &unreadable):
				offset = unreadable.Next // damage teaches nothing: step over it
				continue
			case errors.Is(err, partition.ErrOffsetDeleted):
				break read // retention passed it meanwhile: what was read will do
			case err != nil:
				return nil, err
			}
			for _, r := range res.Records {
				if len(r.Key)+len(r.Value) > codec.MaxDictionaryBytes {
					continue // too large to learn from: not copied
				}
				env, err := wire.AppendEnvelope(nil, r.Key, r.CommittedAtUnixMs, r.Value)
				if err != nil {
					return nil, err
				}
				sample, err := wire.AppendRecordFrame(nil, env)
				if err != nil {
					return nil, err
				}
				if len(sample) > codec.MaxDictionaryBytes {
					continue
				}
				if held+len(sample) > codec.MaxTrainingBytes {
					return samples, nil // as much as a training takes
				}
				held += len(sample)
				samples = append(samples, sample)
			}
			if res.Next <= offset {
				break read
			}
			offset = res.Next
		}
	}
	return samples, nil
}

// sameIncarnation fails with ErrTopicNotFound unless the metastore still
// holds the topic as the incarnation rec names.
func (n *Node) sameIncarnation(ctx context.Context, rec TopicRecord) error {
	cur, ok, err := n.ms.Topic(ctx, rec.Name)
	if err != nil {
		return err
	}
	if !ok || cur.Incarnation != rec.Incarnation {
		return fmt.Errorf("%w: %s (incarnation %s deleted)", ErrTopicNotFound, rec.Name, rec.Incarnation)
	}
	return nil
}

// listDictionaryFiles lists the topic directory's dictionary files for a
// move's listing; the caller holds the topic's guard.
func (n *Node) listDictionaryFiles(topic string) ([]SegmentFile, error) {
	dir := filepath.Join(n.topicsDir, topic)
	entries, err := n.cfg.FS.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list the dictionaries of %s: %w", topic, err)
	}
	var out []SegmentFile
	for _, e := range entries {
		if _, err := wire.ParseDictionaryFileName(e.Name); err != nil || e.IsDir {
			continue
		}
		fi, err := n.cfg.FS.Stat(filepath.Join(dir, e.Name))
		if err != nil {
			return nil, err
		}
		out = append(out, SegmentFile{Name: e.Name, Size: fi.Size})
	}
	return out, nil
}

// receiveDictionary takes a dictionary file of a moved partition's topic:
// checked whole (its CRC, its name against its id, the dictionary), then
// stored in the topic directory durably before the receive may commit
// (partition.StoreDictionaryFile: one already there with the same bytes is
// kept, other bytes under the id refused) and added to the topic's set if
// it is loaded, the newest trained becoming current as at a load. It runs
// under the topic's guard, like a training.
func (n *Node) receiveDictionary(topic string, incarnation wire.IncarnationID, id uint32, size int64, src io.Reader) error {
	b := make([]byte, size) // bounded by checkInstallFile
	if _, err := io.ReadFull(src, b); err != nil {
		return fmt.Errorf("receive dictionary %d of %s: %w", id, topic, err)
	}
	f, err := wire.DecodeDictionaryFile(b)
	if err != nil {
		return fmt.Errorf("receive dictionary %d of %s: %w", id, topic, err)
	}
	d, err := codec.ParseDictionary(f.Dictionary)
	if err != nil {
		return fmt.Errorf("receive dictionary %d of %s: %w", id, topic, err)
	}
	if f.ID != id || d.ID() != id {
		return fmt.Errorf("receive dictionary %d of %s: %w: it holds id %d (dictionary %d)", id, topic, wire.ErrCorrupt, f.ID, d.ID())
	}
	return n.withTopic(topic, func(*supervisor.GuardedTopic) error {
		if err := n.sameIncarnation(context.Background(), TopicRecord{Name: topic, Incarnation: incarnation}); err != nil {
			return fmt.Errorf("receive dictionary %d of %s: %w", id, topic, err)
		}
		if err := partition.StoreDictionaryFile(n.cfg.FS, filepath.Join(n.topicsDir, topic), d, f.TrainedAtMs); err != nil {
			return fmt.Errorf("receive dictionary %d of %s: %w", id, topic, err)
		}
		td := &n.dictionaries
		td.mu.Lock()
		defer td.mu.Unlock()
		loaded, ok := td.topics[topic]
		if !ok || loaded.incarnation != incarnation {
			return nil // loaded from the files at the next open
		}
		if err := loaded.set.Add(d); err != nil {
			return err
		}
		// The newest trained is current (ties: the higher id), as a load
		// of the same files would choose.
		cur := loaded.set.Current()
		if cur == nil || cmp.Or(cmp.Compare(f.TrainedAtMs, loaded.currentTrainedAt), cmp.Compare(id, cur.ID())) > 0 {
			loaded.currentTrainedAt = f.TrainedAtMs
			td.topics[topic] = loaded
			return loaded.set.SetCurrent(id)
		}
		return nil
	})
}
