package introspection_test

import "time"

// Paths of the simulated device used throughout.
const (
	descPath = "/interfaces/interface[name=eth0]/config/description"
	mtuPath  = "/interfaces/interface[name=eth0]/config/mtu"
)

// waitFor bounds every wait on a condition; tests finish far sooner.
const waitFor = 20 * time.Second
