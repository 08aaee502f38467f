# What ember's shared libraries export, checked with `nm -D -C` (included by run.cmake, SHARED).
# For each library built in the folder given to check_exports(dir [lib...]):
#   - the versioned file lib<name>.so.X.Y.Z exists (SOVERSION);
#   - every exported name is ember's (the version script, cmake/ember-exports.map);
#   - no name in a detail namespace is exported but the exceptions below (EMBER_API marks only
#     these; the hidden-by-default visibility keeps every other one inside its library);
#   - the names a program needs are there (a sample of each library's API).

# Detail names that stay exported, and why. A name is "in a detail namespace" when its own
# qualified name (not a template argument) has a `detail` component.
set(_ember_detail_exceptions
  # Called by the inline code of the tensor headers: errors, overflow and shape helpers
  # (ragged_literal: the error of a nested literal whose rows differ in length).
  "^ember::detail::(raise|size_overflow|allocation_failed|moved_from_tensor|arange_length|resolve_reshape|format_tensor|ragged_literal)\\("
  # The rank error of Tensor(Primitive), which every op's result goes through (src/shape.cpp).
  "^ember::detail::primitive_not_of_rank\\("
  # The shape checks, called by the backends (ember_cpu, ember_vulkan, ember_cuda) and Dispatch.
  "^ember::detail::check::"
  # Called by the inline ember::cpu::memory_stats / reset_peak_memory.
  "^ember::detail::cpu::(memory_stats|reset_peak_memory)\\(\\)"
  # Process-wide state of inline functions: one copy shared by the program and every library
  # (autodiff node ids, the gradient hook, the fusion stream of each backend).
  "^ember::detail::ad::next_node_id\\(\\)"
  "^ember::detail::current_gradient_hook\\(\\)"
  # The thread's autocast cast cache, called by the inline autocast::lower (src/autocast.cpp).
  "^ember::detail::autocast::(cache_find|cache_store|cache_clear|cached_casts)\\("
  # (The stream is a class: its get() and the members it calls out of line.)
  "^ember::detail::fusion::Stream<"
  # Fusion's counters, called by the inline Fusion<B> code.
  "^ember::fusion::detail::count_(launch|compile|cache_hit|epilogue)\\("
  # Called by the recorders' and the config functions' templates.
  "^ember::record::detail::(encode|decode|read_file|write_file|write_bytes_atomic|with_extension|check_decoded_size|map_append|param_map)\\("
  "^ember::record::detail::(PyTorchSource|RegularFile)::"
  "^(typeinfo|typeinfo name|vtable) for ember::record::detail::(PyTorchSource|RegularFile)$"
  "^ember::config::detail::(value_to_json|value_from_json|write_text|read_text|path_string)\\("
  # Called by the DataLoader, SqliteDataset and CSV templates of ember::data.
  "^ember::data::detail::(BatchPool|SqliteReader|SqliteWriter)::"
  "^ember::data::detail::(read_csv|csv_column|csv_cell_error|parse_int|parse_double|parse_bool)\\("
  # Called by the Learner's template (include/ember/train/detail/learner_impl.hpp).
  "^ember::train::detail::(SigintGuard|EarlyStopper|ReplicaWorkers)::"
  "^ember::train::detail::(check_checkpoint|commit_checkpoint|remove_checkpoint|clean_artifacts|epoch_seed|format_epoch|format_summary|topk_correct)\\("
  # The Learner's model-independent core (include/ember/train/detail/learner_core.hpp), which
  # the Learner's template calls.
  "^ember::train::detail::(LearnerCore|LoaderShape)::"
  "^ember::train::detail::(check_learner_settings|complete_learner_settings|update_metric)\\("
  # The gradient reducer's core and scale_gradients' step on Dispatch, compiled in
  # ember_dispatch (include/ember/dispatch/train.hpp declares them extern).
  "^(void )?ember::collective::detail::GradientReducerCore<ember::Dispatch>::"
  "^void ember::collective::detail::scale_gradient<ember::Dispatch, "
  "^(typeinfo|typeinfo name|vtable) for ember::collective::detail::GradientReducerCore<ember::Dispatch>$"
  # The Learner of a Dispatch model behind train::detail::ErasedModel, compiled in ember_dispatch
  # (EMBER_DISPATCH_PART_LEARNER, declared extern by include/ember/dispatch/train.hpp): a model's
  # Learner calls them (nm prints them after their return type, hence no anchor).
  "ember::train::detail::(make_erased|fit_erased)<ember::Dispatch, "
  # ember::nccl's way into the CUDA backend (another library): the device's stream, allocation.
  "^ember::detail::cuda::(allocate|check|stream|synchronize|use_device)\\("
  # Dispatch's ops, the base of ember::Dispatch.
  "^ember::detail::dispatch::Ops::"
  # Each op's out-of-line part (src/dispatch/ops.cpp), called by the op's inline part in
  # include/ember/dispatch/ops.hpp when the operands' stack is not one table away.
  "^ember::detail::dispatch::OutOfLine::"
  # The error of a default-made DispatchTensor, thrown from its inline get()
  # (include/ember/dispatch/device.hpp).
  "^ember::detail::dispatch::no_handle\\(\\)"
  # OptimizerAdaptor's model-independent core on Dispatch, compiled once in ember_dispatch
  # (include/ember/dispatch/optim/*.hpp declare it extern): the walk over a model calls it.
  "ember::optim::detail::OptimizerCore<ember::optim::(Adam|AdamW|Sgd), ember::Dispatch>::"
  # The module walks on Dispatch, compiled once per module type in ember_dispatch
  # (EMBER_DISPATCH_MODULE_WALKS in dispatch/instance_lists.hpp, declared extern by each module's
  # Dispatch header, dispatch/nn/*.hpp): a model's walk calls them (to_device and valid rebuild a
  # module through to_device_fields / valid_fields, whose names nm prints after their return
  # type, hence no anchor).
  "ember::module::detail::(visit_params|map_params|to_record|load|to_device_fields|valid_fields)<ember::nn::[A-Za-z0-9]+<ember::Dispatch>"
  "^(typeinfo|typeinfo name|vtable) for ember::detail::dispatch::Ops$"
  # Called by the captured-step templates of the Vulkan and CUDA stacks; the captured step
  # itself (ember::vulkan::CapturedStep and ember::cuda::CapturedStep name it).
  "^ember::(vulkan|cuda)::detail::(bind_input|within_checked_range)\\("
  "^ember::detail::graph::CapturedStep<")

# A sample of what each library must export.
set(_ember_required_ember
  "^ember::Shape::to_string\\(\\) const$" "^typeinfo for ember::ShapeError$"
  "^ember::detail::raise\\(" "^ember::TensorData::convert\\(")
set(_ember_required_ember_cpu
  "^ember::CpuBackend<float>::float_matmul\\("
  "^ember::Autodiff<ember::CpuBackend<float>, ember::NoCheckpointing>::float_matmul\\("
  "^ember::Fusion<ember::CpuBackend<float> >::" "^ember::cpu::set_num_threads\\("
  "^ember::detail::fusion::Stream<ember::CpuBackend<float> >::get\\(\\)")
set(_ember_required_ember_data "^ember::data::MnistDataset::" "^ember::data::detail::BatchPool::")
set(_ember_required_ember_collective "^ember::collective::ThreadCollective::")
set(_ember_required_ember_train
  "^ember::train::FileMetricLogger::log\\(" "^ember::train::PlainRenderer::"
  "^ember::train::write_report\\(")
set(_ember_required_ember_dispatch "^ember::Dispatch::name\\(\\)" "^ember::DispatchDevice::parse\\(")
set(_ember_required_ember_vulkan "^ember::vulkan::is_available\\(\\)"
  "^ember::VulkanBackend::float_matmul\\("
  "^ember::detail::graph::CapturedStep<ember::detail::vk::Graph, ember::VulkanDevice>::replay\\(\\)")

set(_ember_required_ember_cuda "^ember::cuda::is_available\\(\\)"
  "^ember::CudaBackend::float_matmul\\("
  "^ember::detail::graph::CapturedStep<ember::detail::cuda::Graph, ember::CudaDevice>::replay\\(\\)")
set(_ember_required_ember_nccl "^ember::collective::NcclCollective::")

# The part of a demangled name that names the symbol itself: everything before its parameter
# list or the first template argument list, without "typeinfo for " and the like.
function(_ember_symbol_scope name out)
  string(REGEX REPLACE "^(typeinfo name|typeinfo|vtable|VTT|guard variable|construction vtable) for " "" name "${name}")
  string(REGEX MATCH "^[^(<]*" scope "${name}")
  set(${out} "${scope}" PARENT_SCOPE)
endfunction()

function(check_exports dir)
  find_program(NM nm)
  if(NOT NM)
    message(STATUS "consumer[add_subdirectory]: no nm: the exports are not checked")
    return()
  endif()
  set(libs ${ARGN})  # the libraries to check (default: those the shared test builds)
  if(NOT libs)
    set(libs ember ember_cpu ember_data ember_collective ember_train ember_dispatch)
    foreach(lib ember_vulkan ember_cuda ember_nccl)  # where built
      if(EXISTS "${dir}/lib${lib}.so")
        list(APPEND libs ${lib})
      endif()
    endforeach()
  endif()
  set(problems "")
  foreach(lib IN LISTS libs)
    file(GLOB so "${dir}/lib${lib}.so.*.*.*")
    if(NOT so)
      message(FATAL_ERROR "consumer[add_subdirectory]: no versioned lib${lib}.so.X.Y.Z in ${dir}")
    endif()
    list(GET so 0 so)
    execute_process(COMMAND "${NM}" -D -C --defined-only "${so}" OUTPUT_VARIABLE syms
                    RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "consumer[add_subdirectory]: nm -D ${so} failed")
    endif()
    # One name per list item (';' inside names would split them: none of ember's has one).
    string(REPLACE ";" "," syms "${syms}")
    string(REPLACE "\n" ";" syms "${syms}")
    set(names "")
    foreach(line IN LISTS syms)
      # "ADDRESS TYPE NAME", the name without GCC's ABI tag "[abi:cxx11]"
      # (not "A": the linker's own markers _edata, _end, __bss_start)
      if(line MATCHES "^[0-9a-f]+ [B-Zb-z] (.*)$")
        string(REPLACE "[abi:cxx11]" "" name "${CMAKE_MATCH_1}")  # GCC's ABI tag
        list(APPEND names "${name}")
      endif()
    endforeach()
    set(foreign "")
    set(detail "")
    set(n_detail_allowed 0)
    foreach(name IN LISTS names)
      if(NOT name MATCHES "ember::")
        list(APPEND foreign "${name}")
        continue()
      endif()
      _ember_symbol_scope("${name}" scope)
      if(scope MATCHES "(^|::)detail::")
        string(REGEX REPLACE "^(typeinfo name|typeinfo|vtable|VTT|guard variable) for " "" bare
                             "${name}")
        set(allowed FALSE)
        foreach(re IN LISTS _ember_detail_exceptions)
          if(name MATCHES "${re}" OR bare MATCHES "${re}")
            set(allowed TRUE)
            break()
          endif()
        endforeach()
        if(allowed)
          math(EXPR n_detail_allowed "${n_detail_allowed} + 1")
        else()
          list(APPEND detail "${name}")
        endif()
      endif()
    endforeach()
    list(LENGTH names n_names)
    list(LENGTH foreign n_foreign)
    list(LENGTH detail n_detail)
    if(n_foreign GREATER 0)
      list(SUBLIST foreign 0 10 some)
      string(APPEND problems "\n  ${so} exports ${n_foreign} names outside ember's namespace, "
                             "e.g. ${some}")
    endif()
    if(n_detail GREATER 0)
      list(SUBLIST detail 0 20 some)
      string(REPLACE ";" "\n      " some "${some}")
      string(APPEND problems "\n  ${so} exports ${n_detail} detail names that are not listed "
                             "exceptions (tests/consumer/exports.cmake):\n      ${some}")
    endif()
    foreach(re IN LISTS _ember_required_${lib})
      set(found FALSE)
      foreach(name IN LISTS names)
        if(name MATCHES "${re}")
          set(found TRUE)
          break()
        endif()
      endforeach()
      if(NOT found)
        string(APPEND problems "\n  ${so} does not export ${re}")
      endif()
    endforeach()
    message(STATUS "consumer[add_subdirectory]: ${so}: ${n_names} names exported, "
                   "${n_detail_allowed} of them in detail namespaces (listed exceptions)")
  endforeach()
  if(problems)
    message(FATAL_ERROR "consumer[add_subdirectory]: the shared libraries' exports:${problems}")
  endif()
endfunction()
