// The engine programs a scenario case names (case key scenario.engine_program; the table of
// names and traits is parity::engine_programs(), common/engine_programs.h): the inside of the
// pmapped train step, written the way the source document's snippet writes it, mistakes included,
// beside the faithful one.
//
//   pmean               grads = grad(loss_fn)(params, x, y)
//                       grads = lax.pmean(grads, axis_name='data')               (002 §2.1)
//   psum                grads = lax.psum(grads, axis_name='data')                (P2, 000 §4.3)
//   psum-divide         grads = lax.psum(grads, 'data'); grads = tree.map(lambda g:
//                       g / jax.device_count(), grads)                            (S2, 000 §4.3)
//   psum-loss-in-grad   def loss_fn_with_psum(params, x, y):
//                           return lax.psum(loss_fn(params, x, y), axis_name='data')
//                       grads = grad(loss_fn_with_psum)(params, x, y)             (P3, 000 §5.2)
//   psum-loss-in-grad-shard-map  the same step under jax.shard_map(check_vma=True) on
//                       Mesh(devices, ('data',)), in_specs=(P(), P(), P('data'), P('data')):
//                       the replicated params are pvary'd, so their gradient is the sum of the
//                       devices' gradients (engine_trainer's shard_map_train_step.h)      (P3b)
//   params-in-axes-none the pmean step under pmap(in_axes=(None, None, 0, 0)): params and
//                       optimizer state broadcast, not replicated, and returned with
//                       out_axes=None                                             (S4, 000 §5.3)
//   init-per-device     the pmean step; each device's params are init(fold_in(key, device))
//                       instead of one init broadcast to all                     (P4, 000 §4.4)
//   no-grad-reduction   grads = grad(loss_fn)(params, x, y), applied without any reduction
//                                                                                 (P11, 002 table)
//   update-inside-accumulation  with train.grad_accum_steps = k: each micro-batch's
//                       gradient pmean'd and applied at once, k updates a step, where 002 §3.3
//                       accumulates first and updates once                        (P9, 002 §3.3)
//   loss-without-cast   the pmean step on 002 §3.4's loss_fn_mixed without its last line,
//                       loss = loss.astype(jnp.float32): with train.dtype f16 or bf16 the loss
//                       stays in that dtype                                       (P10, 002 §3.4)
//   checkpoint-reshard  the pmean step; at the middle step the run saves a checkpoint (replica 0,
//                       the step, the device count), restores it onto half the devices and
//                       trains on with the same global batch                     (S10, 002 §4.3)
//   process-data-not-sharded  the pmean step over parallel.processes processes, each of which
//                       shards the whole dataset over its own devices only (no
//                       jax.process_index()), so all feed the same samples      (P8, 002 §3.2)
//   axis-name-mismatch  @pmap(axis_name='batch') ... lax.psum(grads, axis_name='devices')
//                                                                                 (P1, 000 §5.1)
//   batch-65-on-8       the pmean step fed a leading axis of 65 on 8 devices      (P6, 001 §1)
//   jit-named-sharding  p_train_step_jit with in_shardings=(data_sharding, data_sharding)
//                       for its four arguments, as written                        (S5, 002 §2.2)
//   jit-params-sharded  the same with all four arguments P('data'): params and optimizer
//                       state sharded on axis 0 like the data                    (P12, 002 §2.2)
//
// Probes look at one engine behaviour a document describes, rather than train:
//   probe-device-axis   the shape of loss = pmap(loss_fn)(...) and how to read it (P7)
//   probe-device-order  the device list, listed repeatedly and from the environment (P13)
//   probe-recompilation which calls of a jitted step retrace it (P14)
//   probe-dropout-key   dropout masks from one key, split keys, folded keys (P5)
//   probe-communication-volume  the bytes each device sends and receives in the pmean of the
//                       gradients, against a ring all-reduce (C1,
//                       src/programs/communication_probe.cpp)
//   probe-memory-7b     a 7B model's per-device bytes of parameters, gradients and Adam state,
//                       from eval_shape, under DDP and sharded (C2, src/programs/memory_probe.cpp)
#pragma once

#include <optional>
#include <string>

#include "parity/common/case_spec.h"
#include "parity/common/engine_programs.h"
#include "parity/common/observed_figures.h"
#include "pmap_engine/jax_release.h"

namespace parity::engine_trainer {

// The JAX release the case names (jax.version), in effect for the engine while the returned
// guard lives: every command that runs the engine for a case holds one around the run.
pmap_engine::ScopedJaxRelease case_jax_release(const CaseSpec& spec);

// Throws InputError, naming the case and `parity cases run ID`, when `program` does not train
// (an error or a probe program): before anything is trained with it.
void require_training_program(const CaseSpec& spec, const EngineProgram& program);

// Error programs (P1, P6, S5, P12) fail before training: runs one step of the case the way the
// program does and returns the engine's error message, or nullopt when the step ran without one.
std::optional<std::string> run_error_program(const CaseSpec& spec);

// JAX's text as a fact-check quotes it: the error's JAX part (the text before the engine's own
// hint, " (pmap_engine: ...)"), and where JAX's own message goes on with what the engine cannot
// reproduce (the Python source line, the function being traced), JAX's fixed words up to there
// and "…" marking the rest: "... should evenly divide the shape). This error
// occurs at source: …" for jit's divisibility check at jax-v0.11.0, "... traced array with
// shape float32[64,784]…" for NumPy on a tracer, "Abstract tracer value encountered where
// concrete value is expected: …". Any other text is its JAX part.
std::string jax_quote(const std::string& engine_error);
// What an error program's case quotes besides the error itself (src/programs/error_figures.cpp):
// for batch-65-on-8 the error a leading 64 raises and what DistributedSampler does with 65
// samples; nothing for the others.
ObservedFigures error_program_figures(const CaseSpec& spec);

// Probe programs: runs the probe on the case's model and data.
struct ProbeResult {
  bool as_expected = false;  // the engine behaves as JAX does (and as the case says)
  std::string observed;      // what the probe saw, in a sentence or two
  ObservedFigures figures;   // what it measured, for the case's fact-check and conditions
};
ProbeResult run_probe_program(const CaseSpec& spec);

}  // namespace parity::engine_trainer
