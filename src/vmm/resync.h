/*
 * resync: after a restore or fork the guest's wall clock, entropy pool and
 * hostname are the template's. Before the VM is reported ready, kiln-vmm
 * asks the guest agent (over the VM's own vsock socket) to set the clock,
 * mix in fresh host entropy and reseed its CRNG, and take a new hostname.
 */
#ifndef KILN_VMM_RESYNC_H
#define KILN_VMM_RESYNC_H

struct vm;
void resync_start(struct vm *vm);

#endif
