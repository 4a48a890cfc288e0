package runtime

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
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
	// MaxTopicDictionaries bounds the dictionaries a topic keeps: a
	// dictionary is kept as long as the topic (a frame may name it), so
	// training past this is refused (ErrTooManyDictionaries).
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
	incarnation wire.IncarnationID
	set         *codec.DictionarySet
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

// forget drops a topic's set: its directory is going (a delete's purge).
func (td *topicDictionaries) forget(topic string) {
	td.mu.Lock()
	defer td.mu.Unlock()
	delete(td.topics, topic)
}

// dictionariesLocked returns the topic's dictionary set for the record's
// incarnation, loading it from the topic directory when it is not loaded
// yet; the caller holds the topic's guard, so no other load or training of
// the topic runs.
func (n *Node) dictionariesLocked(rec TopicRecord) *codec.DictionarySet {
	td := &n.dictionaries
	td.mu.Lock()
	loaded, ok := td.topics[rec.Name]
	td.mu.Unlock()
	if ok && loaded.incarnation == rec.Incarnation {
		return loaded.set
	}
	set, _ := loadDictionaryFiles(n.cfg.FS, filepath.Join(n.topicsDir, rec.Name), n.logger.With(zap.String("topic", rec.Name)))
	td.mu.Lock()
	defer td.mu.Unlock()
	if td.topics == nil {
		td.topics = make(map[string]loadedDictionaries)
	}
	td.topics[rec.Name] = loadedDictionaries{incarnation: rec.Incarnation, set: set}
	return set
}

// loadDictionaryFiles reads every dictionary file of a topic directory into
// a set whose current dictionary is the newest trained. A file that does
// not check out (its CRC, its name against its id, the dictionary itself)
// is logged and left out: the frames that name it read as damage, the
// others are served. A missing directory holds none.
func loadDictionaryFiles(files vfs.FS, dir string, logger *zap.Logger) (*codec.DictionarySet, []DictionaryInfo) {
	set := &codec.DictionarySet{}
	entries, err := files.ReadDir(dir)
	if err != nil {
		if exists, _ := vfs.Exists(files, dir); exists {
			logger.Error("listing the topic's dictionaries failed; frames that name one read as damage", zap.Error(err))
		}
		return set, nil
	}
	var infos []DictionaryInfo
	for _, e := range entries {
		id, err := wire.ParseDictionaryFileName(e.Name)
		if err != nil || e.IsDir {
			continue
		}
		info, d, err := readDictionaryFile(files, filepath.Join(dir, e.Name), id)
		if err == nil {
			err = set.Add(d)
		}
		if err != nil {
			logger.Error("dictionary file unreadable; frames that name it read as damage",
				zap.String("file", e.Name), zap.Error(err))
			continue
		}
		infos = append(infos, info)
	}
	if newest, ok := newestDictionary(infos); ok {
		set.SetCurrent(newest.ID) // in the set: added above
	}
	return set, infos
}

// readDictionaryFile reads and checks one dictionary file whose name says id.
func readDictionaryFile(files vfs.FS, path string, id uint32) (DictionaryInfo, *codec.Dictionary, error) {
	b, err := vfs.ReadFile(files, path, wire.DictionaryFileHeaderSize+wire.MaxDictionaryFileBytes)
	if err != nil {
		return DictionaryInfo{}, nil, err
	}
	f, err := wire.DecodeDictionaryFile(b)
	if err != nil {
		return DictionaryInfo{}, nil, err
	}
	d, err := codec.ParseDictionary(f.Dictionary)
	if err != nil {
		return DictionaryInfo{}, nil, err
	}
	if f.ID != id || d.ID() != id {
		return DictionaryInfo{}, nil, fmt.Errorf("%w: dictionary file named for id %d holds id %d (dictionary %d)", wire.ErrCorrupt, id, f.ID, d.ID())
	}
	return DictionaryInfo{ID: id, Bytes: len(f.Dictionary), TrainedAtMs: f.TrainedAtMs}, d, nil
}

// newestDictionary is the one trained last (ties: the higher id, so every
// node that holds the same files picks the same one).
func newestDictionary(infos []DictionaryInfo) (DictionaryInfo, bool) {
	if len(infos) == 0 {
		return DictionaryInfo{}, false
	}
	return slices.MaxFunc(infos, func(a, b DictionaryInfo) int {
		return cmp.Or(cmp.Compare(a.TrainedAtMs, b.TrainedAtMs), cmp.Compare(a.ID, b.ID))
	}), true
}

// storeDictionaryFile writes d into the topic directory durably (a
// temporary file, fdatasync, rename, directory fsync): after it returns
// the file survives a power loss, and a crash before leaves no file or the
// whole one. A file already there with the same bytes is kept; one with
// other bytes under the id is codec.ErrDictionaryConflict.
func storeDictionaryFile(files vfs.FS, dir string, d *codec.Dictionary, trainedAtMs int64) error {
	name, err := wire.DictionaryFileName(d.ID())
	if err != nil {
		return err
	}
	path := filepath.Join(dir, name)
	if exists, err := vfs.Exists(files, path); err != nil {
		return err
	} else if exists {
		_, have, err := readDictionaryFile(files, path, d.ID())
		if err != nil {
			return fmt.Errorf("dictionary %d: the file there is damaged: %w", d.ID(), err)
		}
		if !bytes.Equal(have.Bytes(), d.Bytes()) {
			return fmt.Errorf("%w: dictionary %d", codec.ErrDictionaryConflict, d.ID())
		}
		return nil
	}
	b, err := wire.EncodeDictionaryFile(wire.DictionaryFile{ID: d.ID(), TrainedAtMs: trainedAtMs, Dictionary: d.Bytes()})
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(files, path, b)
}

// TrainDictionary trains a zstd dictionary on the newest records of the
// topic's partitions this node owns, stores it in the topic directory
// (durably, before anything uses it) and makes it the one the topic's
// logs on this node encode new frames with; frames written before keep
// naming theirs, which stays. Too few records (codec.MinTrainingSamples)
// or records nothing can be learnt from is codec.ErrBadDictionary.
func (n *Node) TrainDictionary(ctx context.Context, topic string, opts DictionaryTraining) (DictionaryInfo, error) {
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
		if err := n.checkIncarnation(t, rec); err != nil {
			return err
		}
		set := n.dictionariesLocked(rec)
		if set.Lookup(d.ID()) == nil && len(set.IDs()) >= MaxTopicDictionaries {
			return fmt.Errorf("%w: %s holds %d", ErrTooManyDictionaries, topic, MaxTopicDictionaries)
		}
		if err := storeDictionaryFile(n.cfg.FS, filepath.Join(n.topicsDir, topic), d, info.TrainedAtMs); err != nil {
			return fmt.Errorf("store dictionary %d of %s: %w", d.ID(), topic, err)
		}
		if err := set.Add(d); err != nil {
			return err
		}
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
	err = n.withTopic(topic, func(*supervisor.GuardedTopic) error {
		_, infos = loadDictionaryFiles(n.cfg.FS, filepath.Join(n.topicsDir, rec.Name), n.logger.With(zap.String("topic", topic)))
		return nil
	})
	if newest, ok := newestDictionary(infos); ok {
		slices.SortFunc(infos, func(a, b DictionaryInfo) int { return cmp.Compare(b.TrainedAtMs, a.TrainedAtMs) })
		i := slices.IndexFunc(infos, func(x DictionaryInfo) bool { return x.ID == newest.ID })
		infos[0], infos[i] = infos[i], infos[0]
	}
	return infos, err
}

// dictionarySamples reads up to want of the topic's newest records, spread
// over the partitions this node owns, each as the one-record payload a
// frame of it holds ([len][envelope]): what the dictionary will compress.
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
				env, err := wire.AppendEnvelope(nil, r.Key, r.CommittedAtUnixMs, r.Value)
				if err != nil {
					return nil, err
				}
				sample, err := wire.AppendRecordFrame(nil, env)
				if err != nil {
					return nil, err
				}
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
