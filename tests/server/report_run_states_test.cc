// What a report says of seeds that have no result yet, through a real
// coordinator: a cancelled seed is "cancelled" (not "failed"), a seed a
// worker holds is "running".
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/server/coordinator_fixture.h"
#include "tests/server/service_test_support.h"

namespace smallem {
namespace {

using testing::Context;

TEST_F(CoordinatorTest, AReportNamesCancelledAndRunningSeedsForWhatTheyAre) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(/*variants=*/2, /*seeds=*/2, &submitted);
  v1::GetExperimentRequest get;
  get.set_name("exp");
  v1::GetExperimentResponse experiment;
  ASSERT_TRUE(client_->GetExperiment(Context().get(), get, &experiment).ok());
  v1::CancelRequest cancel;
  for (const v1::Run& run : experiment.runs()) {
    if (run.variant() == "v1" && run.seed() == 2) cancel.add_run_ids(run.run_id());
  }
  ASSERT_EQ(cancel.run_ids_size(), 1);
  v1::CancelResponse cancelled;
  ASSERT_TRUE(client_->Cancel(Context().get(), cancel, &cancelled).ok());
  // Three runs are left: the baseline's two finish, v1's seed 1 stays held.
  for (const char* worker : {"w1", "w2", "w3"}) {
    v1::LeaseResponse lease = Lease(worker);
    ASSERT_GT(lease.run_id(), 0) << worker;
    v1::GetRunRequest which;
    which.set_run_id(lease.run_id());
    v1::GetRunResponse run;
    ASSERT_TRUE(client_->GetRun(Context().get(), which, &run).ok());
    if (run.run().variant() == "v0") ASSERT_TRUE(Complete(lease, worker).ok());
  }

  v1::ReportRequest request;
  request.set_name("exp");
  request.set_format(v1::REPORT_FORMAT_JSON);
  v1::ReportResponse report;
  grpc::Status status = client_->Report(Context().get(), request, &report);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const nlohmann::json j = nlohmann::json::parse(report.text());
  ASSERT_EQ(j["rows"].size(), 2u);
  const std::string reason = j["rows"][1]["pending_reason"].get<std::string>();
  EXPECT_EQ(reason, "0 of 2 seeds finished, 1 running, 1 cancelled") << report.text();
}

}  // namespace
}  // namespace smallem
