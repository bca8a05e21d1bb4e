package issuer

import "context"

// ClusterFormat exposes clusterFormat: the receipt format level every one
// of voters writes, as this node would work it out leading.
func (s *Service) ClusterFormat(ctx context.Context, voters []string) uint64 {
	return s.clusterFormat(ctx, voters)
}

// AdmissionOn reports whether this node, leading, throttles refusals: it
// has admission control and the receipt format level writes summaries.
func (s *Service) AdmissionOn() bool {
	a := s.adm.Load()
	return a != nil && a.on.Load()
}

// IdleWorkers is how many request goroutines wait for a request.
func (s *Service) IdleWorkers() int { return int(s.idle.Load()) }

// MaxIdleWorkers exposes maxIdleWorkers.
const MaxIdleWorkers = maxIdleWorkers
