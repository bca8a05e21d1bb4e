package systems

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/natsbus"
)

// NATSCluster is three embedded nats-servers in this process, clustered,
// with JetStream on a file store that fsyncs every write (natsbus's
// SyncAlways, the same settings writ's issuers run).
type NATSCluster struct {
	Servers []*server.Server
	URLs    []string
}

// StartNATSCluster starts the three servers under dir.
func StartNATSCluster(dir, name string) (*NATSCluster, error) {
	ports, err := FreePorts(6)
	if err != nil {
		return nil, err
	}
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[2*i+1]))
	}
	c := &NATSCluster{}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	srvs := make([]*server.Server, 3)
	for i := range 3 {
		cfg := natsbus.DefaultServerConfig()
		cfg.Name = fmt.Sprintf("%s%d", name, i+1)
		cfg.Port = ports[2*i]
		cfg.StoreDir = filepath.Join(dir, cfg.Name)
		cfg.ClusterName, cfg.ClusterPort, cfg.Routes = name, ports[2*i+1], routes
		cfg.ReadyTimeout = 30 * time.Second
		wg.Add(1)
		go func() {
			defer wg.Done()
			srvs[i], errs[i] = natsbus.StartServer(cfg, nil)
		}()
	}
	wg.Wait()
	for i := range 3 {
		if srvs[i] != nil {
			c.Servers = append(c.Servers, srvs[i])
			c.URLs = append(c.URLs, natsbus.ClientURL(srvs[i]))
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Connect connects to server i first, failing over to the others.
func (c *NATSCluster) Connect(i int, name string) (*nats.Conn, error) {
	urls := []string{c.URLs[i%len(c.URLs)]}
	for j, u := range c.URLs {
		if j != i%len(c.URLs) {
			urls = append(urls, u)
		}
	}
	return nats.Connect(strings.Join(urls, ","), nats.Name(name), nats.DontRandomize(),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
}

func (c *NATSCluster) Close() {
	for _, s := range c.Servers {
		s.Shutdown()
	}
	for _, s := range c.Servers {
		s.WaitForShutdown()
	}
}

// KV is an R3 JetStream key-value bucket (history 1, file storage) on a
// NATSCluster; a mint is Create, a spend is Update with the revision the
// create returned.
type KV struct {
	Cluster *NATSCluster
	conns   [2]*nats.Conn
	kvs     [2]jetstream.KeyValue
	payload int

	tag  string
	keys []string
	revs []uint64
}

// StartKV starts the cluster under dir and creates the bucket.
func StartKV(ctx context.Context, dir string, payload int) (*KV, error) {
	cl, err := StartNATSCluster(dir, "kv")
	if err != nil {
		return nil, err
	}
	k := &KV{Cluster: cl, payload: payload}
	for i := range k.conns {
		nc, err := cl.Connect(i, fmt.Sprintf("kv-bench-%d", i))
		if err != nil {
			k.Close()
			return nil, err
		}
		k.conns[i] = nc
		js, err := jetstream.New(nc)
		if err != nil {
			k.Close()
			return nil, err
		}
		deadline := time.Now().Add(90 * time.Second)
		for {
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			kv, err := js.CreateOrUpdateKeyValue(actx, jetstream.KeyValueConfig{
				Bucket: "tickets", History: 1, Replicas: 3, Storage: jetstream.FileStorage,
			})
			cancel()
			if err == nil {
				k.kvs[i] = kv
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				k.Close()
				return nil, fmt.Errorf("kv: creating the R3 bucket: %w", err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	return k, nil
}

func (k *KV) Name() string { return "kv" }

func (k *KV) NewRound(tag string, n int) {
	k.tag = tag
	k.keys = make([]string, n)
	k.revs = make([]uint64, n)
	for i := range k.keys {
		k.keys[i] = fmt.Sprintf("t.%s.%d", tag, i)
	}
}

// Mint is Create (create-if-absent) of the ticket key.
func (k *KV) Mint(ctx context.Context, i int) (bool, error) {
	rev, err := k.kvs[i%2].Create(ctx, k.keys[i], Payload(k.tag, i, k.payload))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	k.revs[i] = rev
	return true, nil
}

// Spend is Update with the expected (minted) revision.
func (k *KV) Spend(ctx context.Context, i, client int) (bool, error) {
	_, err := k.kvs[client].Update(ctx, k.keys[i], []byte("spent"), k.revs[i])
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return false, nil
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

func (k *KV) Close() error {
	for _, nc := range k.conns {
		if nc != nil {
			nc.Close()
		}
	}
	k.Cluster.Close()
	return nil
}
