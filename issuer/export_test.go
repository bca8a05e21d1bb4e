package issuer

import "context"

// ClusterFormat exposes clusterFormat: the receipt format level every one
// of voters writes, as this node would work it out leading.
func (s *Service) ClusterFormat(ctx context.Context, voters []string) uint64 {
	return s.clusterFormat(ctx, voters)
}
