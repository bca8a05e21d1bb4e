package main

import (
	"strings"
	"testing"
)

// --nats-advertise: off names nothing, a URL is checked and kept, and
// without an embedded server the default names nothing.
func TestAdvertiseNATS(t *testing.T) {
	for _, tc := range []struct {
		flag, host, want, err string
	}{
		{flag: "off", want: ""},
		{flag: "", host: "127.0.0.1", want: ""}, // no embedded server
		{flag: "nats://writ-0.writ.svc:4222", want: "nats://writ-0.writ.svc:4222"},
		{flag: "tls://10.0.0.5:4222", want: "tls://10.0.0.5:4222"},
		{flag: "nats://a:1,nats://b:2", err: "want one URL"},
		{flag: "http://a:1", err: "scheme"},
		{flag: "nats://a:99999", err: "port"},
	} {
		f := &serveFlags{natsAdv: tc.flag, natsHost: tc.host}
		got, err := f.advertiseNATS(nil)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("--nats-advertise %q: err %v, want one saying %q", tc.flag, err, tc.err)
			}
		case err != nil:
			t.Errorf("--nats-advertise %q: %v", tc.flag, err)
		case got != tc.want:
			t.Errorf("--nats-advertise %q: %q, want %q", tc.flag, got, tc.want)
		}
	}
}
