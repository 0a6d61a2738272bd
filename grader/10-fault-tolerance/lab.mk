# lab.mk: Lab 10's make settings (included by grader/grader.mk). The kit's writing file
# calls (lib/ckpt_fs.h) are wrapped: fsrec.c records every call a save makes, in the process
# it runs in, and kills that process at the call a crash case names.
GRADER_WRAP_10-fault-tolerance := -Wl,--wrap=pl_fs_create -Wl,--wrap=pl_fs_write \
  -Wl,--wrap=pl_fs_sync -Wl,--wrap=pl_fs_close -Wl,--wrap=pl_fs_rename \
  -Wl,--wrap=pl_fs_sync_dir -Wl,--wrap=pl_fs_mkdir -Wl,--wrap=pl_fs_remove
