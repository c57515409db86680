// The dashboard's pieces that need no browser (server/http/): the JSON its
// pages read — the report the same as `smallemctl report --format json`
// asks for —, the token check, the diverged step, the store's counters and
// the /metrics text, on a real Coordinator over a real SQLite file.
#include "server/http/dashboard_api.h"

#include <string>

#include "gtest/gtest.h"
#include "server/http/dashboard_auth.h"
#include "server/http/metrics_text.h"
#include "server/report/experiment_report.h"
#include "tests/server/coordinator_fixture.h"

namespace smallem {
namespace {

class DashboardApiTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    registry_ = std::make_unique<WorkerRegistry>(&coordinator_->store(), &clock_);
    api_ = std::make_unique<DashboardApi>(&coordinator_->store(), &coordinator_->queue(),
                                          registry_.get(), &clock_);
  }
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<DashboardApi> api_;
};

TEST_F(DashboardApiTest, ExperimentCarriesTheReportOfSmallemctlReport) {
  FinishTwoVariants();
  absl::StatusOr<nlohmann::json> page = api_->Experiment("exp");
  ASSERT_TRUE(page.ok()) << page.status();
  absl::StatusOr<ExperimentRecord> e = coordinator_->store().FindExperiment("exp");
  ASSERT_TRUE(e.ok());
  // What the Report rpc renders for `smallemctl report exp --format json`.
  absl::StatusOr<RenderedReport> cli =
      RenderExperimentReport(coordinator_->store(), *e, {.format = ReportFormat::kJson});
  ASSERT_TRUE(cli.ok()) << cli.status();
  EXPECT_EQ((*page)["report"], nlohmann::json::parse(cli->text));
  EXPECT_EQ((*page)["runs"].size(), 2u);
  EXPECT_EQ((*page)["experiment"]["counts"]["succeeded"], 2);
  EXPECT_NE((*page)["figure_svg"].get<std::string>().find("<svg"), std::string::npos);
  // By id as well as by name; unknown is NotFound.
  EXPECT_EQ((*api_->Experiment(std::to_string(e->id)))["experiment"]["name"], "exp");
  EXPECT_EQ(api_->Experiment("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(DashboardApiTest, RunListsItsPointsAfterAStepAndItsAttempts) {
  v1::SubmitResponse submitted;
  UploadAndSubmit(1, 1, &submitted);
  v1::LeaseResponse lease = Lease();
  v1::HeartbeatRequest beat;
  beat.set_worker_id("w1");
  beat.set_run_id(lease.run_id());
  beat.set_attempt(lease.attempt());
  for (int step : {10, 20, 30}) {
    v1::Progress* p = beat.add_points();
    p->set_step(step);
    p->set_total_steps(20);
    p->set_loss(step == 30 ? NAN : 3.0);
  }
  v1::HeartbeatResponse beat_response;
  ASSERT_TRUE(worker_->Heartbeat(testing::Context().get(), beat, &beat_response).ok());
  absl::StatusOr<nlohmann::json> run = api_->Run(lease.run_id(), 10);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ((*run)["points"].size(), 2u);
  EXPECT_EQ((*run)["points"][0]["step"], 20);
  EXPECT_TRUE((*run)["points"][1]["loss"].is_null());  // NaN, stored as +inf
  EXPECT_EQ((*run)["diverged_step"], 30);
  EXPECT_EQ((*run)["attempts"].size(), 1u);
  EXPECT_EQ((*run)["attempts"][0]["worker"], "w1");
  EXPECT_EQ((*run)["spec"]["seed"], 1);
}

TEST_F(DashboardApiTest, ChangesAnswersAtOnceWhenTheCounterMovedOrAfterStop) {
  const uint64_t now = coordinator_->queue().changes();
  EXPECT_EQ(api_->Changes(now + 1, absl::Hours(1))["changes"], now);
  api_->Stop();
  EXPECT_EQ(api_->Changes(now, absl::Hours(1))["changes"], now);
}

TEST(DivergedStepTest, FromAnInfiniteLossOrTheEnginesMessage) {
  EXPECT_EQ(DivergedStep({{.step = 5, .loss = 2.0}, {.step = 9, .loss = HUGE_VAL}}, {}), 9);
  AttemptRecord failed;
  failed.message = "engine error: training diverged: loss is nan at step 417 (lower --lr?)";
  EXPECT_EQ(DivergedStep({{.step = 5, .loss = 2.0}}, {failed}), 417);
  failed.message = "out of memory";
  EXPECT_EQ(DivergedStep({{.step = 5, .loss = 2.0}}, {failed}), std::nullopt);
}

TEST(DashboardAuthTest, BearerOrSessionCookieCarriesTheToken) {
  const std::string token = "a-client-token-of-some-length";
  EXPECT_TRUE(RequestCarriesToken(token, "Bearer " + token, ""));
  EXPECT_FALSE(RequestCarriesToken(token, "Bearer " + token + "x", ""));
  EXPECT_FALSE(RequestCarriesToken(token, token, ""));  // no scheme
  const std::string cookie = std::string(kSessionCookieName) + "=" + SessionCookieValue(token);
  EXPECT_TRUE(RequestCarriesToken(token, "", "theme=dark; " + cookie));
  EXPECT_FALSE(RequestCarriesToken(token, "", std::string(kSessionCookieName) + "=" + token));
  EXPECT_FALSE(RequestCarriesToken("", "Bearer ", ""));  // no token: nobody carries it
  // The cookie never holds the token itself.
  EXPECT_EQ(SessionSetCookie(token, false).find(token), std::string::npos);
  EXPECT_NE(SessionSetCookie(token, false).find("HttpOnly"), std::string::npos);
  EXPECT_NE(SessionSetCookie(token, true).find("; Secure"), std::string::npos);
}

TEST(DashboardAuthTest, OnlyThisSitesPagesOrTheActionHeaderChangeTheSession) {
  const std::string host = "127.0.0.1:8080";
  EXPECT_TRUE(RequestIsFromThisSite(false, host, "http://127.0.0.1:8080", "", ""));
  EXPECT_TRUE(RequestIsFromThisSite(true, host, "https://127.0.0.1:8080", "", ""));
  EXPECT_TRUE(RequestIsFromThisSite(false, host, "", "same-origin", ""));
  // Behind a proxy that terminates TLS: the browser's word decides.
  EXPECT_TRUE(RequestIsFromThisSite(false, host, "https://127.0.0.1:8080", "same-origin", ""));
  EXPECT_TRUE(RequestIsFromThisSite(false, host, "", "", "1"));
  EXPECT_TRUE(RequestIsFromThisSite(false, host, "https://evil.example", "cross-site", "1"));
  // A form on another site, or a bare request that says nothing.
  EXPECT_FALSE(RequestIsFromThisSite(false, host, "https://evil.example", "cross-site", ""));
  EXPECT_FALSE(RequestIsFromThisSite(false, host, "http://127.0.0.1:8080", "cross-site", ""));
  EXPECT_FALSE(RequestIsFromThisSite(false, host, "http://127.0.0.1:8080.evil.example", "", ""));
  EXPECT_FALSE(RequestIsFromThisSite(true, host, "http://127.0.0.1:8080", "", ""));
  EXPECT_FALSE(RequestIsFromThisSite(false, host, "null", "", ""));
  EXPECT_FALSE(RequestIsFromThisSite(false, host, "", "same-site", ""));
  EXPECT_FALSE(RequestIsFromThisSite(false, host, "", "", ""));
  EXPECT_FALSE(RequestIsFromThisSite(false, "", "http://", "", ""));
}

TEST_F(DashboardApiTest, MetricsCountRunsLeasesWorkersCommitsAndDatasetBytes) {
  FinishTwoVariants();
  absl::StatusOr<StoreStats> stats = coordinator_->store().Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->runs.succeeded, 2);
  EXPECT_EQ(stats->attempts, 2);
  EXPECT_GT(stats->commits, 0);
  EXPECT_EQ(stats->datasets, 1);
  EXPECT_GT(stats->dataset_bytes, 3000);
  RpcMetrics rpcs;
  rpcs.Record("/smallem.v1.WorkerService/Lease", "OK", 0.002);
  rpcs.Record("/smallem.v1.WorkerService/Lease", "OK", 7);
  absl::StatusOr<std::string> text =
      RenderMetricsText(coordinator_->store(), *registry_, clock_, rpcs, 10'000);
  ASSERT_TRUE(text.ok()) << text.status();
  for (const std::string& line : std::vector<std::string>{
           "smallem_runs{status=\"succeeded\"} 2", "smallem_leases_granted_total 2",
        "smallem_workers_alive 1", "smallem_devices_alive 1",
        "smallem_rpc_requests_total{method=\"/smallem.v1.WorkerService/Lease\",code=\"OK\"} 2",
        "smallem_rpc_duration_seconds_bucket{method=\"/smallem.v1.WorkerService/Lease\","
        "le=\"0.005\"} 1",
        "smallem_rpc_duration_seconds_bucket{method=\"/smallem.v1.WorkerService/Lease\","
        "le=\"+Inf\"} 2",
        absl::StrCat("smallem_dataset_bytes ", stats->dataset_bytes)}) {
    EXPECT_NE(text->find(line + "\n"), std::string::npos) << line << "\n" << *text;
  }
  // A worker not seen within the window is not alive.
  clock_.AdvanceMs(11'000);
  text = RenderMetricsText(coordinator_->store(), *registry_, clock_, rpcs, 10'000);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("smallem_workers_alive 0\n"), std::string::npos) << *text;
}

}  // namespace
}  // namespace smallem
