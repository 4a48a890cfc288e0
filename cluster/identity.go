package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNoCluster: etcd holds no cluster under the prefix.
var ErrNoCluster = errors.New("cluster: etcd holds no cluster under its prefix")

// ClusterID returns the id of the cluster under the prefix: made once, by
// the first node of the cluster (create), and kept in etcd. A node
// records the id in its data directory and checks it at every start
// after, so a node pointed at another etcd, another prefix, or an etcd
// whose data was lost (which would name none of its topics, and so have
// its startup sweep take every one of them for a deleted topic's
// leftover) refuses to start. Without create, a prefix holding no cluster
// is ErrNoCluster.
func ClusterID(ctx context.Context, cli *clientv3.Client, prefix string, create bool) (string, error) {
	key := newKeys(prefix).clusterID()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return "", fmt.Errorf("cluster: read the cluster id: %w", err)
	}
	if len(resp.Kvs) == 1 {
		return string(resp.Kvs[0].Value), nil
	}
	if !create {
		return "", fmt.Errorf("%w (%s)", ErrNoCluster, key)
	}
	var r [8]byte
	rand.Read(r[:])
	id := hex.EncodeToString(r[:])
	txn, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, id)).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return "", fmt.Errorf("cluster: make the cluster id: %w", err)
	}
	if !txn.Succeeded { // another node made it first
		kvs := txn.Responses[0].GetResponseRange().Kvs
		if len(kvs) != 1 {
			return "", errors.New("cluster: the cluster id vanished as it was made")
		}
		return string(kvs[0].Value), nil
	}
	return id, nil
}
