package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/narad-io/storage/datadir"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs"
)

// A data directory serves one node of one cluster. A participant never
// takes a node alone's directory, never another node's or another
// cluster's, and never a new directory under the id of a node that owns
// partitions (a node that lost its disk would serve them from offset 0
// again); the ids are recorded at the first start, once the checks pass.
// Each of those would otherwise have the node's startup sweep take every
// topic for a deleted one. Refusals are datadir.ErrIdentity.

// storedIdentity is what a data directory holds of a cluster's node.
type storedIdentity struct {
	hasNode    bool // it has a node id: it has served
	cluster    string
	hasCluster bool
}

// chooseNodeID checks what dir has served before the cluster is read,
// and picks the node's id: the directory's, else want, else a new one.
func chooseNodeID(files vfs.FS, dir, want string) (string, storedIdentity, error) {
	if alone, err := runtime.ServedAlone(files, dir); err != nil {
		return "", storedIdentity{}, err
	} else if alone {
		return "", storedIdentity{}, fmt.Errorf("%w: %s has served a node alone (its topic records are in its metastore file); a cluster's node cannot take it: start it without --metastore", datadir.ErrIdentity, dir)
	}
	storedNode, hasNode, err := datadir.StoredNodeID(files, dir)
	if err != nil {
		return "", storedIdentity{}, err
	}
	var stored storedIdentity
	stored.cluster, stored.hasCluster, err = datadir.StoredClusterID(files, dir)
	if err != nil {
		return "", storedIdentity{}, err
	}
	stored.hasNode = hasNode
	switch {
	case hasNode && want != "" && want != storedNode:
		return "", storedIdentity{}, fmt.Errorf("%w: %s is node %q's, not %q", datadir.ErrIdentity, dir, storedNode, want)
	case hasNode:
		return storedNode, stored, nil
	case want == "":
		return datadir.NewNodeID(), stored, nil
	}
	return want, stored, nil
}

// checkIdentity checks the data directory against the cluster etcd
// holds, then records the node's and the cluster's ids in it.
func (p *Participant) checkIdentity(ctx context.Context, files vfs.FS, dir string, stored storedIdentity) error {
	readCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Only a new directory may make the cluster: one that has served (it
	// has a node id) only joins the cluster etcd holds.
	clusterID, err := ClusterID(readCtx, p.cli, "", !stored.hasCluster && !stored.hasNode)
	if errors.Is(err, ErrNoCluster) {
		return fmt.Errorf("%w: %s has served node %q of a cluster (%s), and etcd holds no cluster: wrong --metastore endpoints, or etcd's data was lost",
			datadir.ErrIdentity, dir, p.id, stored.cluster)
	}
	if err != nil {
		return err
	}
	if stored.hasCluster && clusterID != stored.cluster {
		return fmt.Errorf("%w: %s belongs to cluster %s, and etcd holds cluster %s", datadir.ErrIdentity, dir, stored.cluster, clusterID)
	}
	if owned := p.ms.OwnedBy(p.id); !stored.hasNode && owned > 0 {
		return fmt.Errorf("%w: node id %q owns %d partitions of the cluster, and %s is new: a node whose disk was lost must not take its id back (its partitions would serve from offset 0 again)",
			datadir.ErrIdentity, p.id, owned, dir)
	}
	if err := datadir.RecordClusterID(files, dir, clusterID); err != nil {
		return err
	}
	return datadir.RecordNodeID(files, dir, p.id)
}
