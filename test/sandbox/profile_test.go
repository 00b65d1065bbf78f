package sandbox

import (
	"slices"
	"testing"
)

// TestProfiles: stock is the default, as on managed control planes; tuned
// adds the Job syncs and client rates the benchmark relies on; anything
// else is refused with the values that work.
func TestProfiles(t *testing.T) {
	cases := []struct {
		option, env string
		want        Profile
		wantTuning  bool
		wantErr     bool
	}{
		{want: ProfileStock},
		{env: "tuned", want: ProfileTuned, wantTuning: true},
		{option: "stock", env: "tuned", want: ProfileStock},
		{option: "tuned", want: ProfileTuned, wantTuning: true},
		{env: "fast", wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.option+"/"+c.env, func(t *testing.T) {
			t.Setenv("SANDBOX_PROFILE", c.env)
			got, err := resolveProfile(Profile(c.option))
			if c.wantErr {
				if err == nil {
					t.Fatalf("profile %q accepted", c.env)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
			s := &Sandbox{profile: got}
			if tuned := slices.Contains(s.kcmTuning(), "--concurrent-job-syncs=50"); tuned != c.wantTuning {
				t.Fatalf("kcm tuned: %v, want %v", tuned, c.wantTuning)
			}
		})
	}
}
