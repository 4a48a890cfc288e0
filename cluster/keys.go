package cluster

import (
	"strconv"
	"strings"

	"github.com/narad-io/storage/wire"
)

// keys is the key layout under one prefix (the package doc draws it):
// the name of every key the cluster's records live under, and parse,
// which reads a key back.
//
// Invariants:
//   - root is the prefix and ends in "/" (newKeys adds one), so every key
//     is root followed by a name relative to it;
//   - parse reads back what topic, assignment, member, move, drain, lost
//     and fence built the key from (for a valid topic name or node id);
//     every other key under root is keyOther.
type keys struct{ root string }

// newKeys is the layout under prefix; "/narad/" when it is empty.
func newKeys(prefix string) keys {
	if prefix == "" {
		prefix = "/narad/"
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return keys{root: prefix}
}

func (k keys) topic(name string) string { return k.root + "topics/" + name }
func (k keys) topics() string           { return k.root + "topics/" }
func (k keys) members() string          { return k.root + "members/" }
func (k keys) member(id string) string  { return k.members() + id }
func (k keys) election() string         { return k.root + "assigner/" }
func (k keys) clusterID() string        { return k.root + "cluster-id" }
func (k keys) drains() string           { return k.root + "drain/" }
func (k keys) drain(id string) string   { return k.drains() + id }
func (k keys) rebalanced() string       { return k.root + "rebalanced" }
func (k keys) losts() string            { return k.root + "lost/" }
func (k keys) lost(id string) string    { return k.losts() + id }
func (k keys) fence(id string) string   { return k.root + "fence/" + id }
func (k keys) moves(name string) string { return k.root + "moves/" + name + "/" }
func (k keys) move(name string, p int) string {
	return k.moves(name) + strconv.Itoa(p)
}
func (k keys) assignments(name string) string { return k.root + "assign/" + name + "/" }
func (k keys) assignment(name string, p int) string {
	return k.assignments(name) + strconv.Itoa(p)
}

// keyKind is what a key under the prefix holds (parse).
type keyKind int

const (
	keyOther keyKind = iota
	keyTopic
	keyAssignment
	keyMember
	keyMove
	keyDrain
	keyLost
	keyFence
)

// parse says what key holds: a topic record (name), an assignment or a
// move (name, partition), a member record or a drain mark (name is the
// node's id); anything else under the prefix is keyOther.
func (k keys) parse(key string) (kind keyKind, name string, partition int) {
	rest, ok := strings.CutPrefix(key, k.root)
	if !ok {
		return keyOther, "", 0
	}
	if name, ok := strings.CutPrefix(rest, "topics/"); ok && wire.ValidateTopicName(name) == nil {
		return keyTopic, name, 0
	}
	if id, ok := strings.CutPrefix(rest, "members/"); ok && id != "" && !strings.Contains(id, "/") {
		return keyMember, id, 0
	}
	if id, ok := strings.CutPrefix(rest, "drain/"); ok && id != "" && !strings.Contains(id, "/") {
		return keyDrain, id, 0
	}
	if id, ok := strings.CutPrefix(rest, "lost/"); ok && id != "" && !strings.Contains(id, "/") {
		return keyLost, id, 0
	}
	if id, ok := strings.CutPrefix(rest, "fence/"); ok && id != "" && !strings.Contains(id, "/") {
		return keyFence, id, 0
	}
	for prefix, kind := range map[string]keyKind{"assign/": keyAssignment, "moves/": keyMove} {
		if tp, ok := strings.CutPrefix(rest, prefix); ok {
			name, ps, ok := strings.Cut(tp, "/")
			p, err := strconv.Atoi(ps)
			if ok && err == nil && p >= 0 && wire.ValidateTopicName(name) == nil {
				return kind, name, p
			}
		}
	}
	return keyOther, "", 0
}
