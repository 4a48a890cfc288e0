package runtime

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/scrub"
	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// The node's half of docs/design.md, "Scrubber": when ScrubRate is set it
// starts the scrubber over the partitions it owns, and gives it the
// assignment, its open logs looked up without a use, and the topic guard
// its progress writes run under.

// startScrub starts the scrubber's loop, unless ScrubRate is 0.
func (n *Node) startScrub() []*supervisor.Loop {
	if n.cfg.ScrubRate <= 0 {
		return nil
	}
	return []*supervisor.Loop{scrub.Start(n.scrubConfig())}
}

func (n *Node) scrubConfig() scrub.Config {
	return scrub.Config{
		FS:             n.cfg.FS,
		TopicsDir:      n.topicsDir,
		Node:           scrubNode{n},
		Rate:           n.cfg.ScrubRate,
		MetricsByTopic: n.cfg.MetricsByTopic,
		Logger:         n.logger,
		Registerer:     n.promReg,
	}
}

// scrubNode is the node as the scrubber sees it (scrub.Node).
type scrubNode struct{ n *Node }

var _ scrub.Node = scrubNode{}

func (s scrubNode) Assigned(ctx context.Context, topic string, p int) (bool, error) {
	return s.n.ms.Assigned(ctx, topic, p)
}

func (s scrubNode) LogIfOpen(topic string, p int) (*partition.Log, bool) {
	return s.n.LogIfOpen(topic, p)
}

// InPartition runs fn under the topic's guard, the lock every reclaim,
// quarantine, purge and move install of the topic's directories holds,
// once the partition's directory is known to exist under it.
func (s scrubNode) InPartition(topic string, p int, fn func() error) error {
	dirName, err := wire.PartitionDirName(p)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.n.topicsDir, topic, dirName)
	return s.n.withTopic(topic, func(*supervisor.GuardedTopic) error {
		switch exists, err := vfs.Exists(s.n.cfg.FS, dir); {
		case err != nil:
			return err
		case !exists:
			return fmt.Errorf("%w: %s", scrub.ErrPartitionGone, dir)
		}
		return fn()
	})
}
