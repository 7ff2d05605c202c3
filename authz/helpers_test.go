package authz_test

import "time"

// descPath is a leaf of the simulated device.
const descPath = "/interfaces/interface[name=eth0]/config/description"

// waitFor bounds every wait on a condition; tests finish far sooner.
const waitFor = 20 * time.Second
