# How a script `recheck export-python` writes makes this subject's checkpoints without output:
# Megatron's CheckpointWithoutOutput as its layers make it without FP8 (fp8=None), for
# --checkpoint megatron, and with the clearing change in its backward for megatron-clearing
# (python/pr_wrapper.py). The script holds this file after its runtime
# (properties/export_runtime.py: `exported_without_output`).


@exported_without_output("megatron")
def megatron_without_output():
    made = need_megatron("Megatron's CheckpointWithoutOutput").CheckpointWithoutOutput
    return lambda: made(fp8=None)


@exported_without_output("megatron-clearing")
def megatron_without_output_clearing():
    made = clearing_without_output(need_megatron("Megatron's CheckpointWithoutOutput"))
    return lambda: made(fp8=None)
