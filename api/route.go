package api

import (
	"fmt"
	"strings"
)

// MaxRouteLen bounds a route name, in bytes.
const MaxRouteLen = 200

// ValidRoute checks a route name: 1 to MaxRouteLen bytes of letters,
// digits and . _ - @ : / ("inbox-triage@acme", "nightly-backup").
func ValidRoute(name string) error {
	if name == "" || len(name) > MaxRouteLen {
		return fmt.Errorf("a route name is 1-%d bytes", MaxRouteLen)
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("._-@:/", r):
		default:
			return fmt.Errorf("route name %q: %q is not allowed (letters, digits and . _ - @ : /)", name, r)
		}
	}
	return nil
}
