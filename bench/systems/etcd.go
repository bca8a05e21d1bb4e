package systems

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Etcd is three etcd members embedded in this process, each with its own
// data dir and fsync on (etcd's default; UnsafeNoFsync stays false), and two
// clients that each balance over all three members.
type Etcd struct {
	members []*embed.Etcd
	clients [2]*clientv3.Client
	payload int

	mu   sync.Mutex
	tag  string
	keys []string
}

// StartEtcd starts the members under dir and waits until they serve.
func StartEtcd(ctx context.Context, dir string, payload int) (*Etcd, error) {
	ports, err := FreePorts(6)
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := range 3 {
		initial = append(initial, fmt.Sprintf("e%d=http://127.0.0.1:%d", i+1, ports[2*i]))
	}
	e := &Etcd{payload: payload}
	var clientURLs []string
	for i := range 3 {
		cfg := embed.NewConfig()
		cfg.Name = fmt.Sprintf("e%d", i+1)
		cfg.Dir = filepath.Join(dir, cfg.Name)
		pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]))
		cu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]))
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.InitialClusterToken = "writ-bench"
		cfg.ClusterState = embed.ClusterStateFlagNew
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		cfg.UnsafeNoFsync = false
		m, err := embed.StartEtcd(cfg)
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("etcd member %s: %w", cfg.Name, err)
		}
		e.members = append(e.members, m)
		clientURLs = append(clientURLs, cu.String())
	}
	for _, m := range e.members {
		select {
		case <-m.Server.ReadyNotify():
		case <-time.After(60 * time.Second):
			e.Close()
			return nil, fmt.Errorf("etcd: members not ready after 60s")
		case <-ctx.Done():
			e.Close()
			return nil, ctx.Err()
		}
	}
	for c := range e.clients {
		cl, err := clientv3.New(clientv3.Config{Endpoints: clientURLs, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			e.Close()
			return nil, err
		}
		e.clients[c] = cl
	}
	return e, nil
}

func (e *Etcd) Name() string { return "etcd" }

func (e *Etcd) NewRound(tag string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tag = tag
	e.keys = make([]string, n)
	for i := range e.keys {
		e.keys[i] = fmt.Sprintf("/tickets/%s/%d", tag, i)
	}
}

// Mint is a create-if-absent of the ticket key.
func (e *Etcd) Mint(ctx context.Context, i int) (bool, error) {
	k := e.keys[i]
	r, err := e.clients[i%2].Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(Payload(e.tag, i, e.payload)))).Commit()
	if err != nil {
		return false, err
	}
	return r.Succeeded, nil
}

// Spend is Txn(If(Version(k) == 1)).Then(Put(k, "spent")).
func (e *Etcd) Spend(ctx context.Context, i, client int) (bool, error) {
	k := e.keys[i]
	r, err := e.clients[client].Txn(ctx).
		If(clientv3.Compare(clientv3.Version(k), "=", 1)).
		Then(clientv3.OpPut(k, "spent")).Commit()
	if err != nil {
		return false, err
	}
	return r.Succeeded, nil
}

func (e *Etcd) Close() error {
	for _, c := range e.clients {
		if c != nil {
			c.Close()
		}
	}
	for _, m := range e.members {
		m.Close()
	}
	return nil
}
