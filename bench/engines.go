package bench

import "github.com/narad-io/storage/codec"

// Engines is every engine the engine suite runs, in table order.
func Engines() []EngineSpec {
	return []EngineSpec{
		{Name: RawName, Kind: KindBaseline, Open: openRaw(false)},
		{Name: "raw, fallocate()d", Kind: KindBaseline, Open: openRaw(true)},
		{Name: "bare protocol", Kind: KindBaseline, Open: openBareProtocol},
		{Name: "narad Log commit", Kind: KindNarad, Open: openNaradLog(false, codec.None)},
		{Name: "narad Log produce", Kind: KindNarad, Open: openNaradLog(true, codec.None)},
		{Name: "narad Log produce zstd", Kind: KindNarad, Open: openNaradLog(true, codec.Zstd)},
		{Name: "narad Log produce x4", Kind: KindNarad, Producers: 4, Open: openNaradLog(true, codec.None)},
		{Name: "narad Node", Kind: KindNarad, Open: openNaradNode},
		{Name: "etcd wal", Kind: KindPeer, Open: openEtcdWAL},
		{Name: "pebble Sync", Kind: KindPeer, Open: openPebble},
		{Name: "tidwall/wal", Kind: KindPeer, Open: openTidwall},
		{Name: "JetStream sync_always", Kind: KindPeer, Open: openJetStream},
	}
}
